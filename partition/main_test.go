package partition_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

const testTTL = 2 * time.Second

// span is one Run call: a grant of a partition to a member, in local time.
type span struct {
	member     string
	partition  int
	token      fence.Token
	start, end time.Time
	cause      error
}

// recorder collects Run spans from every member of a test.
type recorder struct {
	mu    sync.Mutex
	spans []*span
}

func (r *recorder) run(member string) func(ctx context.Context, o partition.Ownership) {
	return func(ctx context.Context, o partition.Ownership) {
		s := &span{member: member, partition: o.Partition, token: o.Token, start: time.Now()}
		r.mu.Lock()
		r.spans = append(r.spans, s)
		r.mu.Unlock()
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // in-flight work finishing
		r.mu.Lock()
		s.end, s.cause = time.Now(), context.Cause(ctx)
		r.mu.Unlock()
	}
}

// running reports whether member has a Run that has not ended.
func (r *recorder) running(member string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.member == member && s.end.IsZero() {
			return true
		}
	}
	return false
}

func (r *recorder) snapshot() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]span, len(r.spans))
	for i, s := range r.spans {
		out[i] = *s
	}
	return out
}

func startMember(t *testing.T, pool *pgxpool.Pool, id string, n int, run func(context.Context, partition.Ownership)) *partition.Member {
	t.Helper()
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{
		Group: "g", Partitions: n, ID: id, Run: run,
		Lease: lease.Config{TTL: testTTL},
	})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(pgtest.Context(t)))
	t.Cleanup(func() { stopMember(t, m) })
	return m
}

func stopMember(t *testing.T, m *partition.Member) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.Stop(ctx); err != nil {
		t.Errorf("Stop %s: %v", m.ID(), err)
	}
}

// converged waits until every partition is held by its desired owner among
// exactly the members want, and returns how long that took.
func converged(t *testing.T, pool *pgxpool.Pool, want []string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, db := pgtest.Context(t), pgtest.DBOn(t, pool)
	var last partition.Status
	for time.Since(start) < within {
		st, err := partition.Inspect(ctx, db, "g")
		if err != nil && !errors.Is(err, partition.ErrGroupNotFound) {
			t.Fatal(err)
		}
		last = st
		if isConverged(st, want) {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not converged to members %v within %v: %+v", want, within, last)
	return 0
}

func isConverged(st partition.Status, want []string) bool {
	live := map[string]bool{}
	for _, m := range st.Members {
		if m.Live {
			live[m.ID] = true
		}
	}
	if len(live) != len(want) {
		return false
	}
	for _, id := range want {
		if !live[id] {
			return false
		}
	}
	for _, p := range st.Partitions {
		if !p.Held || p.Owner != p.Desired {
			return false
		}
	}
	return len(st.Partitions) > 0
}
