package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// checkHandoffs checks a partition's handoff events, oldest first: tokens
// strictly increase, each Previous is the token before it (0 for the
// first), and abrupt says which ends were abrupt (want[i] for the end
// before handoff i).
func checkHandoffs(evs []queue.Event, owners []string, abrupt []bool) error {
	if len(evs) != len(owners) {
		return fmt.Errorf("%d handoffs; want %d", len(evs), len(owners))
	}
	var prev fence.Token
	for i, e := range evs {
		switch {
		case e.Kind != queue.EventHandoff:
			return fmt.Errorf("event %d is %q, not a handoff", i, e.Kind)
		case e.Token <= prev:
			return fmt.Errorf("handoff %d: token %d does not increase (previous %d)", i, e.Token, prev)
		case e.Previous != prev:
			return fmt.Errorf("handoff %d: Previous %d; want %d", i, e.Previous, prev)
		case e.Abrupt != abrupt[i]:
			return fmt.Errorf("handoff %d: Abrupt %v; want %v", i, e.Abrupt, abrupt[i])
		case e.Owner != owners[i]:
			return fmt.Errorf("handoff %d: owner %q; want %q", i, e.Owner, owners[i])
		case e.At.IsZero() || e.Group != "emails" || e.Partition != 0 || e.Job != 0:
			return fmt.Errorf("handoff %d: %+v", i, e)
		}
		prev = e.Token
	}
	return nil
}

// grantRun runs a Processor on partition 0 of "emails" under a new lease
// of owner; it returns the lease, a cancel that ends the run, and a channel
// closed when it returned, once the run is recorded as open.
func grantRun(t *testing.T, ctx context.Context, pool *pgxpool.Pool, owner string) (*lease.Lease, context.CancelCauseFunc, chan struct{}) {
	t.Helper()
	lc, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: owner})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	l, err := lc.TryAcquire(ctx, partition.LeaseName("emails", 0))
	pgtest.Must(t, err)
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: queue.NewWorkers(), PollInterval: 20 * time.Millisecond})
	pgtest.Must(t, err)
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(rctx, partition.Ownership{Group: "emails", Partition: 0, Token: l.Token(), Lease: l})
	}()
	t.Cleanup(func() {
		cancel(partition.ErrHandoff)
		<-done
	})
	for mark(t, ctx, pool) != int64(l.Token()) {
		select {
		case <-done:
			t.Fatalf("the run of %s ended before it was recorded", owner)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return l, cancel, done
}

// Each grant that starts running a partition records a handoff event:
// tokens strictly increase, Previous is the grant before, and a grant
// whose predecessor's run ended without closing (its lease taken from it
// while it ran) records Abrupt. The checker refuses doctored histories
// (the negative control). A stale or equal token opening a run again
// writes no handoff (its control: the statement without that test does).
func TestEventsRecordHandoffs(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	// a: a clean end (a handoff, then the lease released).
	la, cancelA, doneA := grantRun(t, ctx, pool, "a")
	cancelA(partition.ErrHandoff)
	<-doneA
	pgtest.Must(t, la.Release(ctx))
	// b: its lease taken away while it runs: its run stays open.
	_, _, _ = grantRun(t, ctx, pool, "b")
	_, err := pool.Exec(ctx, `DELETE FROM leasehold.leases WHERE name = $1`, partition.LeaseName("emails", 0))
	pgtest.Must(t, err)
	// c: finds b's run open.
	grantRun(t, ctx, pool, "c")

	evs, err := c.Events(ctx, "emails", 0)
	pgtest.Must(t, err)
	if !slices.IsSortedFunc(evs, func(a, b queue.Event) int { return int(b.ID - a.ID) }) {
		t.Errorf("events not newest first: %+v", evs)
	}
	slices.Reverse(evs)
	owners, abrupt := []string{"a", "b", "c"}, []bool{false, false, true}
	if err := checkHandoffs(evs, owners, abrupt); err != nil {
		t.Fatalf("%v\n%+v", err, evs)
	}
	// The negative control: the checker sees a broken chain.
	for name, doctor := range map[string]func([]queue.Event){
		"token not increasing": func(e []queue.Event) { e[2].Token = e[1].Token },
		"wrong previous":       func(e []queue.Event) { e[1].Previous = 0 },
		"abrupt lost":          func(e []queue.Event) { e[2].Abrupt = false },
	} {
		d := slices.Clone(evs)
		doctor(d)
		if checkHandoffs(d, owners, abrupt) == nil {
			t.Errorf("control (%s): the checker accepts a doctored history", name)
		}
	}
	// A stale grant (b's token) or the current one again opening a run
	// writes no handoff: the run is not started over, and the history
	// keeps its chain. The control: the statement without its test of the
	// previous token writes one for the current grant again.
	st, err := store.For("")
	pgtest.Must(t, err)
	open := func(stmt string, tok fence.Token, owner string) int {
		t.Helper()
		var prev *int64
		var part int32
		var wasOpen, recorded bool
		pgtest.Must(t, pool.QueryRow(ctx, stmt, "emails", []int32{0}, []int64{int64(tok)}, []string{owner}).Scan(&part, &prev, &wasOpen, &recorded, nil, nil))
		var n int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.events WHERE kind = 'handoff'`).Scan(&n))
		return n
	}
	for _, g := range []struct {
		tok   fence.Token
		owner string
	}{{evs[1].Token, "stale"}, {evs[2].Token, "again"}} {
		if n := open(st.Queue.OpenRun, g.tok, g.owner); n != len(evs) {
			t.Errorf("opening a run with token %d (%s) left %d handoff events; want %d: none written", g.tok, g.owner, n, len(evs))
		}
	}
	doctored := strings.Replace(st.Queue.OpenRun, "WHERE coalesce(p.token < a.token, true)", "", 1)
	if doctored == st.Queue.OpenRun {
		t.Fatal("control: the open statement's test of the previous token changed; update the control")
	}
	if n := open(doctored, evs[2].Token, "again"); n != len(evs)+1 {
		t.Errorf("control: without its test of the previous token the open statement left %d handoff events; want %d", n, len(evs)+1)
	}
	_, err = pool.Exec(ctx, `DELETE FROM leasehold.events WHERE owner = 'again'`)
	pgtest.Must(t, err)
	// Limits: the newest one; an unknown group; a bad limit.
	if one, err := c.Events(ctx, "emails", 1); err != nil || len(one) != 1 || one[0].ID != evs[2].ID {
		t.Errorf("Events(limit 1) = %+v, %v; want the newest", one, err)
	}
	if _, err := c.Events(ctx, "nope", 0); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Errorf("unknown group: %v; want ErrUnknownGroup", err)
	}
	for _, n := range []int{-1, 1001} {
		if _, err := c.Events(ctx, "emails", n); !errors.Is(err, queue.ErrInvalidFilter) {
			t.Errorf("limit %d: %v; want ErrInvalidFilter", n, err)
		}
	}
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('quiet', 2)`)
	pgtest.Must(t, err)
	if evs, err := c.Events(ctx, "quiet", 0); err != nil || evs == nil || len(evs) != 0 {
		t.Errorf("a group without events: %v, %v; want none", evs, err)
	}
}

// An outcome refused by the fence is recorded as a fenced event with the
// refused token and the job, written once the run ends (its Processor's
// last run: the flush at stop), after the handoff of the same grant.
func TestEventsRecordFencedRefusals(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ids, l, ws := fencedAtSecond(t, ctx, pool, c, 2, "a#1")
	var fenced []int64
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour, PartitionConcurrency: 1,
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			if e.Outcome == queue.OutcomeFenced {
				fenced = append(fenced, e.ID) // one job at a time: no race
			}
		}}})
	pgtest.Must(t, err)
	p.Run(ctx, partition.Ownership{Group: "emails", Partition: 0, Token: l.Token(), Lease: l}) // returns when fenced
	if !slices.Equal(fenced, ids[1:]) {
		t.Fatalf("fenced runs %v; want %v", fenced, ids[1:])
	}
	evs, err := c.Events(ctx, "emails", 0)
	pgtest.Must(t, err)
	want := []queue.Event{
		{Group: "emails", Partition: 0, Kind: queue.EventFenced, Owner: "a", Token: l.Token(), Job: ids[1]},
		{Group: "emails", Partition: 0, Kind: queue.EventHandoff, Owner: "a", Token: l.Token()},
	}
	if len(evs) != len(want) {
		t.Fatalf("events %+v; want %+v", evs, want)
	}
	for i := range evs {
		e := evs[i]
		e.ID, e.At = 0, time.Time{}
		if e != want[i] {
			t.Errorf("event %d: %+v; want %+v", i, e, want[i])
		}
	}
	// Counted too: one fenced run, one completed.
	ts, err := c.Throughput(ctx, "emails", 2)
	pgtest.Must(t, err)
	var sum queue.Throughput
	for _, x := range ts {
		sum.Completed, sum.Fenced = sum.Completed+x.Completed, sum.Fenced+x.Fenced
	}
	if sum.Completed != 1 || sum.Fenced != 1 {
		t.Errorf("throughput %+v; want 1 completed, 1 fenced", ts)
	}
}
