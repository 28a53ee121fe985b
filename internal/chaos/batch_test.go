package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// batchScenario runs the batch workload on an in-process fleet, with no
// randomness: member a takes every partition and its handlers are held at
// their gate, effects written; the producer submits and seals a batch of
// n items; a is frozen past its leases and b takes over and finishes the
// batch (items and follow-ups); then a is released and its late commits
// meet the fence. It returns the check and how many of a's runs were held.
func batchScenario(t *testing.T, unfenced bool, n int) (Result, int) {
	t.Helper()
	ctx := pgtest.ContextFor(t, 2*time.Minute)
	l, err := OpenLocal(ctx, LocalConfig{DatabaseURL: pgtest.URL(t), Workload: "batch", Partitions: 4, Keys: 8,
		TTL: time.Second, Unfenced: unfenced})
	pgtest.Must(t, err)
	defer l.Close(context.WithoutCancel(ctx))
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Since(start) > 45*time.Second {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	heldBy := func(id string) bool {
		st, err := l.Status(ctx)
		if err != nil || len(st.Partitions) != 4 {
			return false
		}
		for _, p := range st.Partitions {
			if !p.Held || p.Owner != id {
				return false
			}
		}
		return true
	}
	a, err := l.Start(ctx, "a")
	pgtest.Must(t, err)
	waitUntil("a to hold every partition", func() bool { return heldBy(a.ID) })
	a.HoldHandlers()
	pgtest.Must(t, l.Feed(ctx, n, 100*time.Millisecond))
	waitUntil("a handler of a to reach its gate", func() bool { return len(a.Held()) > 0 })
	// Let the runs past the gate commit (as the demo does): a transaction
	// frozen between its fence check and its commit would keep the
	// takeover waiting on the lease row.
	time.Sleep(200 * time.Millisecond)
	a.Freeze()
	held := a.Held()
	b, err := l.Start(ctx, "b")
	pgtest.Must(t, err)
	waitUntil("b to finish the batch", func() bool {
		done, items, err := l.Progress(ctx)
		return err == nil && items == n && done == n && heldBy(b.ID)
	})
	fenced := a.Fenced()
	held = a.Release()
	waitUntil("a's held runs to meet the fence", func() bool { return a.Fenced() >= fenced+len(held) })
	a.ResumeClock()
	r, err := l.Check(ctx)
	pgtest.Must(t, err)
	t.Logf("%d runs held; verdict %s, %d items, %d duplicates, %d refused, follow-ups run %d of %d; violations %q",
		len(held), r.Verdict, r.Jobs, r.Duplicates, r.StaleRefused, r.FollowupsRun, r.FollowupsExpected, r.Violations)
	return r, len(held)
}

// Fenced, the held runs' effects roll back with their refused commits: each
// item applied once, the progress exact, each follow-up run once after
// the last item.
func TestBatchScenarioFencedAppliesOnce(t *testing.T) {
	t.Parallel()
	r, held := batchScenario(t, false, 16)
	if r.Verdict != VerdictPass || r.Jobs != 16 || r.Applied != 16 || r.StaleRefused < held {
		t.Fatalf("verdict %s, %d items, %d applied, %d refused of %d held: %q", r.Verdict, r.Jobs, r.Applied, r.StaleRefused, held, r.Violations)
	}
	if r.FollowupsExpected != 2 || r.FollowupsRun != 2 {
		t.Fatalf("follow-ups run %d of %d", r.FollowupsRun, r.FollowupsExpected)
	}
}

// The control, deterministically: unfenced, each held run's effect
// committed on its own before b ran the item again, so every held item
// is applied twice, and the checker must say so.
func TestBatchScenarioUnfencedShowsDuplicates(t *testing.T) {
	t.Parallel()
	r, held := batchScenario(t, true, 16)
	if r.Verdict != VerdictFail || r.Duplicates < held || r.FencedApplied < held {
		t.Fatalf("verdict %s, %d duplicates, %d refused yet applied, %d runs held: the checker missed the control's duplicates",
			r.Verdict, r.Duplicates, r.FencedApplied, held)
	}
}
