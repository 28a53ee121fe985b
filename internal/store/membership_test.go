package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
)

// The membership statements wake the group in the statement that changes
// the membership, and only then: a join (Heartbeat of a new incarnation,
// Join), a leave that deleted a row. A heartbeat that extends a membership,
// a Join refused for its partition count or for a live twin, and a second
// Leave notify nothing (every notification wakes every listening session
// of the database). The first join's notification is the control that the
// listener hears them.
func TestMembershipStatementsNotifyOnlyOnChange(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	st, err := store.For("")
	pgtest.Must(t, err)
	q := st.Partition
	lc, err := pgx.Connect(ctx, url)
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	_, err = lc.Exec(ctx, `LISTEN "`+q.Channel+`"`)
	pgtest.Must(t, err)
	heard := func() []string {
		var got []string
		for {
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			n, err := lc.WaitForNotification(wctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
					pgtest.Must(t, err)
				}
				return got
			}
			got = append(got, n.Payload)
		}
	}
	_, err = pool.Exec(ctx, q.CreateGroup, "g", 4)
	pgtest.Must(t, err)
	ttl := time.Minute.Microseconds()
	heartbeat := func(inc string) (joined, row bool) {
		var woke *int
		err := pool.QueryRow(ctx, q.Heartbeat, "g", "m1", inc, ttl, q.Channel).Scan(&joined, &woke)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, false
		}
		pgtest.Must(t, err)
		return joined, true
	}
	join := func(id, inc string, parts int) (joined, row bool) {
		var woke *int
		err := pool.QueryRow(ctx, q.Join, "g", id, inc, ttl, q.Channel, parts).Scan(&joined, &woke)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, false
		}
		pgtest.Must(t, err)
		return joined, true
	}
	leave := func(id, inc string) {
		_, err := pool.Exec(ctx, q.Leave, "g", id, inc, q.Channel)
		pgtest.Must(t, err)
	}
	steps := []struct {
		what string
		do   func() (joined, row bool)
		want bool // joined
		row  bool
		n    int // notifications
	}{
		{"heartbeat of a new incarnation (a join)", func() (bool, bool) { return heartbeat("a") }, true, true, 1},
		{"heartbeat of the same incarnation", func() (bool, bool) { return heartbeat("a") }, false, true, 0},
		{"heartbeat of a live twin", func() (bool, bool) { return heartbeat("b") }, false, false, 0},
		{"Join with another partition count", func() (bool, bool) { return join("m2", "c", 8) }, false, false, 0},
		{"Join of a live twin", func() (bool, bool) { return join("m1", "b", 4) }, false, false, 0},
		{"Join", func() (bool, bool) { return join("m2", "c", 4) }, true, true, 1},
		{"Leave", func() (bool, bool) { leave("m2", "c"); return false, false }, false, false, 1},
		{"Leave again", func() (bool, bool) { leave("m2", "c"); return false, false }, false, false, 0},
		{"Leave of another incarnation", func() (bool, bool) { leave("m1", "b"); return false, false }, false, false, 0},
	}
	for _, s := range steps {
		joined, row := s.do()
		got := heard()
		if joined != s.want || row != s.row || len(got) != s.n {
			t.Errorf("%s: joined %v, row %v, notifications %q; want joined %v, row %v, %d notifications",
				s.what, joined, row, got, s.want, s.row, s.n)
		}
		for _, p := range got {
			if p != "g" {
				t.Errorf("%s: notification payload %q; want the group's name", s.what, p)
			}
		}
	}
}
