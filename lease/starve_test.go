package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// The starvation tests run a Client on a fake clock, so that local time (the
// deadlines, the renewal schedule) moves only when the test moves it, one
// wake of the renewal loop at a time; the database's TTL is real time, long
// enough (10s) never to run out while the test steps through 15s of local
// time in a fraction of that. A transaction holds one lease's row FOR SHARE
// for 1.5 TTL of local time: not a fence check of this version (FOR KEY
// SHARE, which renewals do not wait for: TestFenceCheckDoesNotHoldOffRenewals)
// but any other locker of the row, such as an effect transaction of a
// worker of the version before (FOR SHARE) during a rolling upgrade.
const (
	starveTTL  = 10 * time.Second // SafetyMargin 1s: the local deadline is 9s after a renewal is sent
	starveHold = starveTTL * 3 / 2
)

// starveStep is what the test saw after one wake of the renewal loop.
type starveStep struct {
	at      time.Duration         // local time since the slow effect took its lock
	errs    map[string]error      // Lease.Err of every lease
	done    map[string]bool       // whether Lease.Done was closed
	rows    map[string]lease.Info // the database's rows
	effects map[string]error      // a fenced effect on each lease but the slow one, run during the wake
	renews  []lease.RenewEvent    // the renewal statements of the wake
}

// starveRun is the recorded history of one run.
type starveRun struct {
	owner  string
	leases map[string]*lease.Lease
	steps  []starveStep
	losses []lease.LossEvent
}

// starveRig is a Client on a fake clock whose renewal loop the test drives.
type starveRig struct {
	t      *testing.T
	pool   *pgxpool.Pool
	clk    *fakeclock.Clock
	c      *lease.Client
	f      *lease.Fence
	sleeps chan time.Duration
	// pending is what is left of the renewal loop's current sleep after
	// runHeldRow moved the clock to the end of the slow effect.
	pending time.Duration

	mu     sync.Mutex
	renews []lease.RenewEvent
	losses []lease.LossEvent
}

func newStarveRig(t *testing.T, waiting bool) *starveRig {
	t.Helper()
	pool, _ := fenceSetup(t)
	r := &starveRig{t: t, pool: pool, clk: fakeclock.New(time.Now()), sleeps: make(chan time.Duration, 64)}
	r.c = newClient(t, pool, lease.Config{Owner: "m", TTL: starveTTL, Clock: r.clk,
		// A short StatementTimeout (also the Client's lock_timeout) keeps
		// the negative control, whose renewals wait for it, quick.
		StatementTimeout: 300 * time.Millisecond,
		MinBackoff:       200 * time.Millisecond, MaxBackoff: time.Second,
		Rand: rand.New(rand.NewPCG(1, 2)),
		Hooks: lease.Hooks{
			OnRenew: func(e lease.RenewEvent) { r.mu.Lock(); r.renews = append(r.renews, e); r.mu.Unlock() },
			OnLoss:  func(e lease.LossEvent) { r.mu.Lock(); r.losses = append(r.losses, e); r.mu.Unlock() },
		}})
	lease.SetLoopHook(r.c, func(d time.Duration) { r.sleeps <- d })
	if waiting {
		lease.UseWaitingRenewal(r.c)
	}
	// The effect transactions must outlive the run in real time.
	f, err := lease.NewFence(pgtest.DBOn(t, pool), lease.FenceConfig{IdleTimeout: time.Minute})
	pgtest.Must(t, err)
	r.f = f
	return r
}

// nextSleep waits for the renewal loop to go to sleep again (or exit: -1).
func (r *starveRig) nextSleep() time.Duration {
	r.t.Helper()
	select {
	case d := <-r.sleeps:
		return d
	case <-time.After(time.Minute):
		r.t.Fatal("the renewal loop did not go back to sleep within a minute")
		return 0
	}
}

// takeRenews returns the renewal events since the last call.
func (r *starveRig) takeRenews() []lease.RenewEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.renews
	r.renews = nil
	return ev
}

// step lets the sleeping renewal loop wake after wait (advancing the fake
// clock by it), runs a fenced effect on each lease in effectsOn meanwhile,
// waits for the loop to sleep again and records what it sees. It returns
// the loop's next wait, or -1 if the loop exited.
func (r *starveRig) step(run *starveRun, at time.Duration, wait time.Duration, effectsOn []string) (starveStep, time.Duration) {
	ctx := pgtest.Context(r.t)
	r.clk.Advance(wait)
	s := starveStep{at: at, errs: map[string]error{}, done: map[string]bool{}, effects: map[string]error{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, name := range effectsOn {
		l := run.leases[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.f.Tx(ctx, name, l.Token(), effect(l.Token(), fmt.Sprintf("%s at %v", name, at)))
			mu.Lock()
			s.effects[name] = err
			mu.Unlock()
		}()
	}
	next := r.nextSleep()
	wg.Wait()
	names := make([]string, 0, len(run.leases))
	for name, l := range run.leases {
		names = append(names, name)
		s.errs[name] = l.Err()
		select {
		case <-l.Done():
			s.done[name] = true
		default:
		}
	}
	infos, err := r.c.InspectMany(ctx, names...)
	pgtest.Must(r.t, err)
	s.rows = map[string]lease.Info{}
	for _, i := range infos {
		s.rows[i.Name] = i
	}
	s.renews = r.takeRenews()
	return s, next
}

// runHeldRow acquires a, b and c, holds b's row FOR SHARE in an effect
// transaction that locks it first (Begin, the lock, the check, the effect)
// for hold of local time, stepping the renewal loop through it, then
// commits that transaction and returns the history and the commit's error.
// With fenceOnly, the transaction takes no lock but its fence check's.
func runHeldRow(t *testing.T, waiting bool, hold time.Duration, fenceOnly ...bool) (*starveRig, *starveRun, error) {
	ctx := pgtest.Context(t)
	r := newStarveRig(t, waiting)
	ls, err := r.c.TryAcquireMany(ctx, "a", "b", "c")
	pgtest.Must(t, err)
	run := &starveRun{owner: "m", leases: map[string]*lease.Lease{"a": ls[0], "b": ls[1], "c": ls[2]}}
	wait := r.nextSleep()

	tx, err := r.f.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.WithoutCancel(ctx))
	if len(fenceOnly) == 0 || !fenceOnly[0] {
		_, err := tx.Exec(ctx, `SELECT FROM leasehold.leases WHERE name = 'b' FOR SHARE`)
		pgtest.Must(t, err)
	}
	pgtest.Must(t, r.f.Check(ctx, tx, "b", ls[1].Token()))
	pgtest.Must(t, effect(ls[1].Token(), "the slow effect")(tx))

	var at time.Duration
	for wait >= 0 && at+wait <= hold {
		at += wait
		var s starveStep
		s, wait = r.step(run, at, wait, []string{"a", "c"})
		run.steps = append(run.steps, s)
	}
	r.clk.Advance(hold - at) // the slow effect ends after hold
	r.pending = wait - (hold - at)
	commit := tx.Commit(ctx)
	r.mu.Lock()
	run.losses = append([]lease.LossEvent(nil), r.losses...)
	r.mu.Unlock()
	return r, run, commit
}

// othersHeld checks a recorded history: every lease but slow stayed held
// throughout, locally (Err nil, Done open, no loss reported) and in the
// database (same owner and token, unexpired, and renewed once per
// RenewInterval while the slow effect held its row), and every fenced effect on them
// committed. The history must cover hold.
func othersHeld(run *starveRun, slow string, hold time.Duration) error {
	for _, e := range run.losses {
		if e.Name != slow {
			return fmt.Errorf("lease %s lost: %v", e.Name, e.Err)
		}
	}
	renewedAt := map[string]map[time.Time]bool{}
	for _, s := range run.steps {
		for name, l := range run.leases {
			if name == slow {
				continue
			}
			row := s.rows[name]
			switch {
			case s.errs[name] != nil:
				return fmt.Errorf("at %v: lease %s: Err = %v", s.at, name, s.errs[name])
			case s.done[name]:
				return fmt.Errorf("at %v: lease %s: Done closed", s.at, name)
			case row.Owner != run.owner || row.Token != l.Token() || !row.Held():
				return fmt.Errorf("at %v: lease %s: database row %+v; want held by %s with token %v", s.at, name, row, run.owner, l.Token())
			case s.effects[name] != nil:
				return fmt.Errorf("at %v: fenced effect on %s: %v", s.at, name, s.effects[name])
			}
			if renewedAt[name] == nil {
				renewedAt[name] = map[time.Time]bool{}
			}
			renewedAt[name][row.RenewedAt] = true
		}
	}
	if len(run.steps) == 0 || hold-run.steps[len(run.steps)-1].at > starveTTL/10 {
		return fmt.Errorf("the history does not cover the %v of the slow effect", hold)
	}
	// One renewal of all per RenewInterval (at most TTL/3).
	want := int(hold / (starveTTL / 3))
	for name, seen := range renewedAt {
		if len(seen)-1 < want { // the grant, then the renewals
			return fmt.Errorf("lease %s: renewed %d times in the database while %s was held; want at least %d", name, len(seen)-1, slow, want)
		}
	}
	return nil
}

// One effect transaction holding one lease's row for longer than the TTL
// costs the holder that lease (by its local deadline) and no other: the
// renewal skips the locked row instead of waiting for it while holding the
// others'. The negative control runs the same scenario with the renewal
// statement that waits for each row's lock (the behaviour before): the
// checker must find the other leases lost.
func TestSlowEffectDoesNotCostTheOtherLeases(t *testing.T) {
	t.Parallel()
	_, run, commit := runHeldRow(t, false, starveHold)
	if err := othersHeld(run, "b", starveHold); err != nil {
		t.Fatalf("with the renewal skipping locked rows: %v", err)
	}

	// The slow lease: not renewed while its row was locked (Busy, not lost),
	// held until its local deadline, lost by it, never earlier.
	b := run.leases["b"]
	deadline := starveTTL - starveTTL/10 // counted from the acquire, sent just before the lock
	var busy bool
	for _, s := range run.steps {
		if !s.rows["b"].RenewedAt.Equal(run.steps[0].rows["b"].RenewedAt) {
			t.Fatalf("at %v: b was renewed in the database while its row was locked", s.at)
		}
		for _, e := range s.renews {
			busy = busy || e.Busy > 0
		}
		switch lost := errors.Is(s.errs["b"], lease.ErrLost); {
		case s.at < deadline && s.errs["b"] != nil:
			t.Fatalf("at %v, before its local deadline: b's Err = %v; want nil", s.at, s.errs["b"])
		case s.at >= deadline && (!lost || !strings.Contains(s.errs["b"].Error(), "local deadline")):
			t.Fatalf("at %v, after its local deadline: b's Err = %v; want ErrLost by the local deadline", s.at, s.errs["b"])
		}
	}
	if !busy {
		t.Fatal("no renewal reported b busy")
	}
	if !errors.Is(b.Err(), lease.ErrLost) {
		t.Fatalf("b after the slow effect: Err = %v; want ErrLost", b.Err())
	}
	// The slow effect checked in time, and no newer grant of b exists: it
	// commits (a takeover would have waited for it).
	pgtest.Must(t, commit)

	// The negative control: waiting for the locked row costs every lease.
	_, old, _ := runHeldRow(t, true, starveHold)
	err := othersHeld(old, "b", starveHold)
	if err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("negative control (the renewal waits for row locks): checker = %v; want the other leases lost", err)
	}
	t.Logf("negative control: %v", err)
}

// A fence check locks its lease's row FOR KEY SHARE, which a renewal
// (FOR NO KEY UPDATE: it changes no key column) does not wait for: an
// effect transaction holding its check for longer than the TTL costs the
// holder no lease, not even its own, and its effect commits. (Only a
// change of the token waits for it: TestTakeoverCannotCommitWhileAnEffect-
// TransactionIsOpen.) The control is TestSlowEffectDoesNotCostTheOtherLeases:
// the same run with the row also locked FOR SHARE loses b.
func TestFenceCheckDoesNotHoldOffRenewals(t *testing.T) {
	t.Parallel()
	_, run, commit := runHeldRow(t, false, starveHold, true)
	if err := othersHeld(run, "", starveHold); err != nil { // b too
		t.Fatalf("with b's fence check held for %v: %v", starveHold, err)
	}
	for _, s := range run.steps {
		for _, e := range s.renews {
			if e.Busy > 0 {
				t.Fatalf("at %v: a renewal found a row busy (%+v) while only a fence check held it", s.at, e)
			}
		}
	}
	pgtest.Must(t, commit)
}

// A lease whose row was locked only for a while is renewed soon after the
// lock goes, by a retry of that lease alone, without waiting for the next
// renewal of all (due up to RenewInterval later), and is never lost.
func TestBusyLeaseIsRenewedSoonAfterItsRowIsFree(t *testing.T) {
	t.Parallel()
	hold := starveTTL / 2
	r, run, commit := runHeldRow(t, false, hold)
	pgtest.Must(t, commit)
	if err := othersHeld(run, "b", hold); err != nil {
		t.Fatal(err)
	}
	b := run.leases["b"]
	before := b.Deadline()
	// The retries back off up to MinBackoff + MaxBackoff (1.2s); the next
	// renewal of all is up to RenewInterval (3.3s) away.
	within := r.c.Config().MinBackoff + r.c.Config().MaxBackoff
	wait := r.pending
	for at := hold; b.Deadline().Equal(before); {
		if wait < 0 || at-hold > within {
			t.Fatalf("b not renewed within %v of local time after its row was freed (Err %v)", at-hold, b.Err())
		}
		at += wait
		var s starveStep
		s, wait = r.step(run, at, wait, nil)
		if s.errs["b"] != nil {
			t.Fatalf("at %v: b lost: %v", at, s.errs["b"])
		}
		if !b.Deadline().Equal(before) && (len(s.renews) != 1 || s.renews[0].Count != 1 || s.renews[0].Renewed != 1) {
			t.Fatalf("at %v: b renewed by %+v; want by a retry of b alone", at, s.renews)
		}
	}
	if b.Err() != nil {
		t.Fatalf("b: Err = %v; want held", b.Err())
	}
}

// Fence.Tx checks after fn, so a slow fn holds no lock on the lease row: the
// lease is renewed while fn runs, every lease stays held, and the effect
// commits.
func TestFenceTxDoesNotLockTheLeaseWhileFnRuns(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	r := newStarveRig(t, false)
	ls, err := r.c.TryAcquireMany(ctx, "a", "b", "c")
	pgtest.Must(t, err)
	run := &starveRun{owner: "m", leases: map[string]*lease.Lease{"a": ls[0], "b": ls[1], "c": ls[2]}}
	wait := r.nextSleep()

	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.f.Tx(ctx, "b", ls[1].Token(), func(tx pgx.Tx) error {
			if err := effect(ls[1].Token(), "slow fn")(tx); err != nil {
				return err
			}
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	var at time.Duration
	for wait >= 0 && at+wait <= starveHold {
		at += wait
		var s starveStep
		s, wait = r.step(run, at, wait, []string{"a", "c"})
		run.steps = append(run.steps, s)
	}
	close(release)
	pgtest.Must(t, <-done)
	r.mu.Lock()
	run.losses = append(run.losses, r.losses...)
	r.mu.Unlock()
	if err := othersHeld(run, "", starveHold); err != nil { // b too
		t.Fatal(err)
	}
	if n := count(t, r.pool, ls[1].Token()); n != 1 {
		t.Fatalf("%d slow effects committed; want 1", n)
	}
}
