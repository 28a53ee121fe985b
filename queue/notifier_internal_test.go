package queue

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// Enqueues to different partitions of one group within the window are
// coalesced: only the first notifies in its statement, the rest are left
// to the window's one flush, however many partitions they spread over
// (keyless jobs are placed round robin). Control: enqueues to different
// groups each notify in their statement, and so does an enqueue after the
// window.
func TestNotifierCoalescesByGroup(t *testing.T) {
	n := newNotifier(nil, "ch", "", time.Hour, nil)
	in := 0
	for part := range 64 {
		if notify, _, _ := n.inStatement([]wakeKey{{"g", part}}); notify {
			in++
		}
	}
	if in != 1 {
		t.Fatalf("%d of 64 enqueues to partitions of one group notified in their statements; want 1", in)
	}
	in = 0
	for i := range 8 {
		if notify, _, _ := n.inStatement([]wakeKey{{fmt.Sprint("other-", i), 0}}); notify {
			in++
		}
	}
	if in != 8 {
		t.Fatalf("control: %d of 8 enqueues to 8 groups notified in their statements; want 8", in)
	}
	short := newNotifier(nil, "ch", "", time.Nanosecond, nil)
	short.inStatement([]wakeKey{{"g", 0}})
	time.Sleep(time.Millisecond)
	if notify, _, _ := short.inStatement([]wakeKey{{"g", 1}}); !notify {
		t.Fatal("control: an enqueue after the window did not notify in its statement")
	}
}

// The partitions of enqueues coalesced within a window are carried by the
// next enqueue that notifies in its statement, whatever their group, and
// are then no longer pending; a carry that failed makes them pending again.
func TestNotifierCarriesPending(t *testing.T) {
	n := newNotifier(nil, "ch", "", time.Hour, nil)
	if notify, carry, _ := n.inStatement([]wakeKey{{"g", 0}}); !notify || len(carry) != 0 {
		t.Fatalf("first enqueue: notify %v, carry %v; want its own notification, nothing to carry", notify, carry)
	}
	for _, k := range []wakeKey{{"g", 1}, {"g", 2}} {
		if notify, _, _ := n.inStatement([]wakeKey{k}); notify {
			t.Fatalf("enqueue to %v within the window notified in its statement", k)
		}
		n.committed([]wakeKey{k})
	}
	n.mu.Lock()
	n.last["g"] = time.Now().Add(-2 * time.Hour) // the window passed
	n.mu.Unlock()
	notify, carry, carried := n.inStatement([]wakeKey{{"h", 5}})
	slices.Sort(carry)
	if !notify || !slices.Equal(carry, []string{"1:g", "2:g"}) || len(carried) != 2 {
		t.Fatalf("enqueue after the window: notify %v, carry %v; want it to notify and carry 1:g and 2:g", notify, carry)
	}
	if _, carry, _ := n.inStatement([]wakeKey{{"i", 0}}); len(carry) != 0 {
		t.Fatalf("carried partitions still pending: %v", carry)
	}
	n.committed(carried) // the carrying statement failed
	n.mu.Lock()
	pending := len(n.pending)
	n.mu.Unlock()
	if pending != 2 {
		t.Fatalf("%d pending after a failed carry; want 2", pending)
	}
}

// A flush that cannot notify (the database went away) is logged, not
// dropped in silence: the owners then find the jobs only at their next
// poll. Control: the same flush on a live pool logs nothing.
func TestNotifierLogsAFailedFlush(t *testing.T) {
	t.Parallel()
	st, err := store.For("")
	pgtest.Must(t, err)
	for _, dead := range []bool{false, true} {
		pool, err := pgxpool.New(pgtest.Context(t), pgtest.MigratedURL(t))
		pgtest.Must(t, err)
		if dead {
			pool.Close()
		} else {
			t.Cleanup(pool.Close)
		}
		var buf bytes.Buffer
		n := newNotifier(pool, st.Queue.Channel, st.Queue.Notify, time.Nanosecond, slog.New(slog.NewTextHandler(&buf, nil)))
		n.mu.Lock()
		n.pending[wakeKey{"g", 3}] = true
		n.oldest = time.Now().Add(-time.Hour)
		n.mu.Unlock()
		n.flush()
		logged := strings.Contains(buf.String(), "could not notify") && strings.Contains(buf.String(), "partitions=1")
		if logged != dead {
			t.Fatalf("dead pool %v: logged %v; want %v (log: %q)", dead, logged, dead, buf.String())
		}
	}
}
