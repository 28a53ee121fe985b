package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
)

// ReleaseMany releases several leases in one statement: another owner can
// take them all at once, and each lease is done. Control: releasing them
// one by one sends one statement each (the count can tell).
func TestReleaseManyReleasesInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, count := pgtest.CountingPool(t, nil)
	st, err := store.For("")
	pgtest.Must(t, err)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	b := newClient(t, pool, lease.Config{Owner: "b"})
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("%s/many/%d", t.Name(), i)
	}
	for _, together := range []bool{true, false} {
		ls, err := a.TryAcquireAny(ctx, names...)
		pgtest.Must(t, err)
		if len(ls) != len(names) {
			t.Fatalf("a acquired %d of %d", len(ls), len(names))
		}
		count.Take(st.Lease.ReleaseMany)
		count.Take(st.Lease.Release)
		if together {
			pgtest.Must(t, a.ReleaseMany(ctx, ls...))
		} else {
			for _, l := range ls {
				pgtest.Must(t, l.Release(ctx))
			}
		}
		many, one := count.Take(st.Lease.ReleaseMany), count.Take(st.Lease.Release)
		switch {
		case together && (many != 1 || one != 0):
			t.Fatalf("ReleaseMany of %d sent %d release-many and %d single statements; want 1 and 0", len(ls), many, one)
		case !together && one != len(ls):
			t.Fatalf("control: %d Releases sent %d statements; want %d", len(ls), one, len(ls))
		}
		for _, l := range ls {
			if !errors.Is(l.Err(), lease.ErrReleased) {
				t.Fatalf("%s after the release: Err = %v; want ErrReleased", l.Name(), l.Err())
			}
		}
		lb, err := b.TryAcquireAny(ctx, names...)
		pgtest.Must(t, err)
		if len(lb) != len(names) {
			t.Fatalf("together %v: b took %d of %d released leases at once", together, len(lb), len(names))
		}
		// A lease of another Client is refused, and nothing is released.
		if err := a.ReleaseMany(ctx, lb[0]); !errors.Is(err, lease.ErrInvalidConfig) {
			t.Fatalf("ReleaseMany of b's lease by a = %v; want ErrInvalidConfig", err)
		}
		if lb[0].Err() != nil {
			t.Fatalf("b's lease after a's refused ReleaseMany: %v", lb[0].Err())
		}
		pgtest.Must(t, b.ReleaseMany(ctx, lb...))
		pgtest.Must(t, b.ReleaseMany(ctx, lb...)) // idempotent: nothing left to send
		if n := count.Take(st.Lease.ReleaseMany); n != 1 {
			t.Fatalf("two ReleaseMany of the same leases sent %d statements; want 1", n)
		}
	}
}

// A ReleaseMany the database does not confirm (here its context is done
// before it is sent) returns an error; every lease is done all the same,
// and the rows free themselves at expiry: another owner cannot take them
// before, and can after (the control that the rows were not released).
func TestReleaseManyNotConfirmed(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a", TTL: time.Second})
	b := newClient(t, pool, lease.Config{Owner: "b", TTL: time.Second})
	names := []string{t.Name() + "/0", t.Name() + "/1", t.Name() + "/2"}
	ls, err := a.TryAcquireAny(ctx, names...)
	pgtest.Must(t, err)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.ReleaseMany(dead, ls...); err == nil {
		t.Fatal("ReleaseMany with a done context returned no error")
	}
	for _, l := range ls {
		if !errors.Is(l.Err(), lease.ErrReleased) {
			t.Fatalf("%s after an unconfirmed release: Err = %v; want ErrReleased", l.Name(), l.Err())
		}
	}
	if got, err := b.TryAcquireAny(ctx, names...); err != nil || len(got) != 0 {
		t.Fatalf("b took %d of the unconfirmed releases' leases before they expired (err %v); want none", len(got), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for held := 0; ; {
		got, err := b.TryAcquireAny(ctx, names...) // skips those b holds
		pgtest.Must(t, err)
		if held += len(got); held == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("b holds %d of %d leases 10s after an unconfirmed release of 1s leases", held, len(names))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A release marks each row released (expires_at = renewed_at: what
// partition.Inspect and `leasehold status` show as "released", not
// "expired"), however many rows one ReleaseMany takes: the two columns got
// two readings of clock_timestamp() each, which differed by a microsecond
// on some rows (a status in CI showed one of two partitions a stopping
// member released as expired). Control: Release of one lease.
func TestReleaseManyMarksEveryRowReleased(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	a := newClient(t, pool, lease.Config{Owner: "a"})
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("%s/%03d", t.Name(), i)
	}
	for _, many := range []bool{true, false} {
		ls, err := a.TryAcquireAny(ctx, names...)
		pgtest.Must(t, err)
		if len(ls) != len(names) {
			t.Fatalf("acquired %d of %d", len(ls), len(names))
		}
		if many {
			pgtest.Must(t, a.ReleaseMany(ctx, ls...))
		} else {
			for _, l := range ls {
				pgtest.Must(t, l.Release(ctx))
			}
		}
		infos, err := a.InspectMany(ctx, names...)
		pgtest.Must(t, err)
		var bad []string
		for _, i := range infos {
			if i.Held() || !i.ExpiresAt.Equal(i.RenewedAt) {
				bad = append(bad, fmt.Sprintf("%s: renewed %s, expires %s", i.Name,
					i.RenewedAt.Format("15:04:05.000000"), i.ExpiresAt.Format("15:04:05.000000")))
			}
		}
		if len(infos) != len(names) || len(bad) > 0 {
			t.Fatalf("ReleaseMany %v: %d rows read, %d not marked released: %v", many, len(infos), len(bad), bad[:min(len(bad), 5)])
		}
	}
}
