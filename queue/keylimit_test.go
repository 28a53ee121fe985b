package queue_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// The limits per key (Policy.KeyConcurrency, Policy.KeyRate) are checked
// over a recorded history of what handlers did, across a graceful handoff
// (a member joins), a paused owner (its clock and its handlers stop past
// its lease, then it resumes) and a crash (a member's handlers die and its
// lease expires in the database).

type limited struct{ Seq int }

func (limited) Kind() string { return "limited" }

// effect is one step of a handler's work, begun or ended.
type effect struct {
	key   string
	begin bool
	at    time.Time
	who   string // the member
}

// effectLog records effects in the order they happened (one mutex: the
// slice's order is the real order across goroutines).
type effectLog struct {
	mu  sync.Mutex
	evs []effect
}

func (h *effectLog) add(who, key string, begin bool) {
	h.addAt(who, key, begin, time.Now())
}

// addAt records an effect at at.
func (h *effectLog) addAt(who, key string, begin bool, at time.Time) {
	h.mu.Lock()
	h.evs = append(h.evs, effect{key: key, begin: begin, at: at, who: who})
	h.mu.Unlock()
}

func (h *effectLog) events() []effect {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]effect(nil), h.evs...)
}

// maxOverlap returns, per key, the most effects in progress at once.
func maxOverlap(evs []effect) map[string]int {
	now, most := make(map[string]int), make(map[string]int)
	for _, e := range evs {
		if e.begin {
			now[e.key]++
			most[e.key] = max(most[e.key], now[e.key])
		} else {
			now[e.key]--
		}
	}
	return most
}

// limitMember is a member of one fleet running the "limited" handler: it
// works in steps, each begun only if its context is live, and stops between
// steps while paused; once dead (crashed) it does nothing.
type limitMember struct {
	m      *partition.Member
	clk    *fakeclock.Clock
	paused atomic.Bool
	dead   atomic.Bool
	gate   chan struct{} // closed: not paused
	mu     sync.Mutex
	stop   chan struct{}
	starts *effectLog               // handler calls (not made once dead)
	ctxs   map[context.Context]bool // the running handlers' contexts
}

// newLimitMember starts a member of group "emails" (8 partitions, TTL 1s)
// whose clock ticks at real speed until frozen.
func newLimitMember(t *testing.T, pool *pgxpool.Pool, id string, pol queue.Policy, effects, starts *effectLog, step time.Duration, steps int) *limitMember {
	t.Helper()
	lm := &limitMember{clk: fakeclock.New(time.Now()), gate: make(chan struct{}), stop: make(chan struct{}), starts: starts,
		ctxs: make(map[context.Context]bool)}
	close(lm.gate)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[limited]) error {
		if lm.dead.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		// A start is when the handler was called, as the rate limit counts
		// it (this line runs a scheduling delay later, which differs from
		// start to start); without a rate, now.
		at := queue.CalledAt(w)
		if at.IsZero() {
			at = time.Now()
		}
		lm.starts.addAt(id, w.Key, true, at)
		lm.mu.Lock()
		lm.ctxs[ctx] = true
		lm.mu.Unlock()
		defer func() {
			lm.mu.Lock()
			delete(lm.ctxs, ctx)
			lm.mu.Unlock()
		}()
		for range steps {
			lm.mu.Lock()
			gate := lm.gate
			lm.mu.Unlock()
			<-gate // paused: no step begins
			if lm.dead.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			effects.add(id, w.Key, true)
			select {
			case <-time.After(step):
			case <-ctx.Done():
			}
			effects.add(id, w.Key, false)
		}
		return nil
	}, queue.WithPolicy(pol))
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: quiet}), queue.ProcessorConfig{Workers: ws,
		PollInterval: 20 * time.Millisecond, MinRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond, StopGrace: 200 * time.Millisecond})
	pgtest.Must(t, err)
	lm.m, err = partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, ID: id, Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: time.Second, Clock: lm.clk}})
	pgtest.Must(t, err)
	go func() {
		// The clock keeps up with real time while not paused (stepping it
		// a fixed amount per tick would let it fall behind: the member
		// would trust its lease past its end in the database).
		last := time.Now()
		for {
			select {
			case <-lm.stop:
				return
			case <-time.After(5 * time.Millisecond):
				now := time.Now()
				if !lm.paused.Load() {
					lm.clk.Advance(now.Sub(last))
				}
				last = now
			}
		}
	}()
	pgtest.Must(t, lm.m.Start(pgtest.Context(t)))
	t.Cleanup(func() {
		lm.resume(0)
		lm.dead.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lm.m.Stop(ctx)
		close(lm.stop)
	})
	return lm
}

// pause stops the member's clock (no renewal: its lease expires in the
// database) and its handlers between steps, as a SIGSTOP would.
func (lm *limitMember) pause() {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if lm.paused.Swap(true) {
		return
	}
	lm.gate = make(chan struct{})
}

// resume moves the member's clock on by jump (past its lease: its grants
// end), waits until it holds no partition and its handlers' contexts are
// cancelled, then lets its handlers go on: a process resumed after a pause
// past its lease whose handlers check their contexts. (The cancellation
// lands asynchronously, on the lease's timers: a step a handler begins
// before it lands can overlap the new owner's jobs; see docs/control.md.)
func (lm *limitMember) resume(jump time.Duration) {
	if !lm.paused.Load() {
		return
	}
	lm.clk.Advance(jump)
	for start := time.Now(); jump > 0 && (len(lm.m.Owned()) > 0 || lm.live()) && time.Since(start) < 5*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	lm.paused.Store(false)
	close(lm.gate)
}

// live reports whether a running handler's context is not cancelled.
func (lm *limitMember) live() bool {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for ctx := range lm.ctxs {
		if ctx.Err() == nil {
			return true
		}
	}
	return false
}

// crash stops the member's clock for good and ends its handlers' work at
// once: they begin no step again.
func (lm *limitMember) crash() {
	lm.dead.Store(true)
	lm.pause()
}

// limitRun runs the scenario with pol on every member: jobs of 8 keys (one
// per partition) enqueued steadily for the whole run, member a alone, then
// b joining (a graceful handoff), a paused past its lease and resumed, c
// joining and crashing. It returns the effects and the starts.
func limitRun(t *testing.T, pol queue.Policy, handoffs, drain bool) (effects, starts *effectLog) {
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	effects, starts = &effectLog{}, &effectLog{}
	var keys []string
	for p := range 8 {
		keys = append(keys, keysIn(p, 1, "lim")...)
	}
	a := newLimitMember(t, pool, "a", pol, effects, starts, 5*time.Millisecond, 4)
	produce, produced := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(produced)
		for seq := 0; ; seq++ {
			var jobs []queue.Job
			for _, k := range keys {
				jobs = append(jobs, queue.Job{Group: "emails", Key: k, Args: limited{Seq: seq}},
					queue.Job{Group: "emails", Key: k, Args: limited{Seq: seq}})
			}
			if _, err := c.EnqueueMany(ctx, jobs...); err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			select {
			case <-produce:
				return
			case <-time.After(15 * time.Millisecond):
			}
		}
	}()
	time.Sleep(time.Second)
	if handoffs {
		b := newLimitMember(t, pool, "b", pol, effects, starts, 5*time.Millisecond, 4)
		time.Sleep(1500 * time.Millisecond) // the rebalance hands partitions from a to b
		a.pause()
		time.Sleep(2500 * time.Millisecond) // b takes a's partitions once a's lease expires
		a.resume(10 * time.Second)
		cm := newLimitMember(t, pool, "c", pol, effects, starts, 5*time.Millisecond, 4)
		time.Sleep(1500 * time.Millisecond)
		cm.crash()
		time.Sleep(2500 * time.Millisecond) // a and b take c's partitions
		_ = b
	} else {
		time.Sleep(2 * time.Second)
	}
	close(produce)
	<-produced
	if drain {
		pgtest.WaitNoPendingJobs(t, pool, 60*time.Second)
	}
	return effects, starts
}

func TestKeyConcurrencyHoldsAcrossHandoffs(t *testing.T) {
	t.Parallel()
	const limit = 3
	effects, _ := limitRun(t, queue.Policy{KeyConcurrency: limit}, true, true)
	most := maxOverlap(effects.events())
	reached := 0
	for k, n := range most {
		if n > limit {
			t.Errorf("key %s: %d jobs ran at once; the limit is %d\n%s", k, n, limit, describe(effects.events(), k))
		}
		reached = max(reached, n)
	}
	if reached < limit {
		t.Errorf("no key ever ran %d jobs at once (at most %d): the run does not exercise the limit", limit, reached)
	}
}

// Control: the same run (without the handoffs) with the limit far above 3
// runs more than 3 jobs of a key at once: the check above can fail.
func TestKeyConcurrencyControlExceedsWithoutTheLimit(t *testing.T) {
	t.Parallel()
	effects, _ := limitRun(t, queue.Policy{KeyConcurrency: 100}, false, true)
	exceeded := false
	for _, n := range maxOverlap(effects.events()) {
		exceeded = exceeded || n > 3
	}
	if !exceeded {
		t.Fatalf("without the limit no key ran more than 3 jobs at once: the check cannot fail (%v)", maxOverlap(effects.events()))
	}
}

// rateViolations returns, per key, the windows of per that held more than
// n starts.
func rateViolations(evs []effect, n int, per time.Duration) map[string]int {
	byKey := make(map[string][]time.Time)
	for _, e := range evs {
		if e.begin {
			byKey[e.key] = append(byKey[e.key], e.at)
		}
	}
	bad := make(map[string]int)
	for k, ts := range byKey {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := n; i < len(ts); i++ {
			if ts[i].Sub(ts[i-n]) < per {
				bad[k]++
			}
		}
	}
	return bad
}

// describe lists key's events for a failure's message.
func describe(evs []effect, key string) string {
	var b strings.Builder
	t0 := evs[0].at
	for _, e := range evs {
		if e.key == key {
			fmt.Fprintf(&b, "%s %v %v\n", e.who, e.begin, e.at.Sub(t0).Round(time.Millisecond))
		}
	}
	return b.String()
}

func TestKeyRateHoldsAcrossHandoffs(t *testing.T) {
	t.Parallel()
	// A period longer than the lease's TTL (1s): a new owner after a crash
	// or a pause must wait for the previous owner's starts to leave it.
	rate := queue.Rate{Starts: 8, Per: 1500 * time.Millisecond}
	_, starts := limitRun(t, queue.Policy{KeyConcurrency: 4, KeyRate: rate}, true, false)
	evs := starts.events()
	if bad := rateViolations(evs, rate.Starts, rate.Per); len(bad) > 0 {
		for k := range bad {
			t.Errorf("windows of %v with more than %d starts of key %s:\n%s", rate.Per, rate.Starts, k, describe(evs, k))
			break
		}
	}
	// The limit binds: over the run (about 10 s) each key started at most
	// about 10 s / 1.5 s × 8 jobs, far fewer than were enqueued.
	if len(evs) < 8*5 {
		t.Errorf("only %d starts: the run does not exercise the limit", len(evs))
	}
}

// Control: without the rate limit the same run starts more than 8 jobs of
// a key within 1.5 s.
func TestKeyRateControlExceedsWithoutTheLimit(t *testing.T) {
	t.Parallel()
	_, starts := limitRun(t, queue.Policy{KeyConcurrency: 4}, false, false)
	if bad := rateViolations(starts.events(), 8, 1500*time.Millisecond); len(bad) == 0 {
		t.Fatal("without the limit no key started more than 8 jobs within 1.5s: the check cannot fail")
	}
}

type narrow struct{}

func (narrow) Kind() string { return "narrow" }

type wide struct{}

func (wide) Kind() string { return "wide" }

// A job whose key limit is 1 runs alone, whatever the limits of the jobs
// after it: wide (limit 4), narrow (limit 1), wide, wide on one key run
// as w1, then n2 alone, then w3 and w4 together.
func TestKeyLimitOfOneRunsAlone(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	log := &effectLog{}
	ws := queue.NewWorkers()
	run := func(ctx context.Context, name string) {
		log.add(name, "k", true)
		time.Sleep(100 * time.Millisecond)
		log.add(name, "k", false)
	}
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[wide]) error {
		run(ctx, fmt.Sprint("w", w.ID))
		return nil
	}, queue.WithPolicy(queue.Policy{KeyConcurrency: 4}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[narrow]) error {
		run(ctx, "narrow")
		return nil
	})
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: quiet}), queue.ProcessorConfig{Workers: ws, PollInterval: 50 * time.Millisecond})
	pgtest.Must(t, err)
	_, err = c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: "k", Args: wide{}}, queue.Job{Group: "emails", Key: "k", Args: narrow{}},
		queue.Job{Group: "emails", Key: "k", Args: wide{}}, queue.Job{Group: "emails", Key: "k", Args: wide{}})
	pgtest.Must(t, err)
	serveWith(t, pool, "emails", 8, p, false)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	running := map[string]bool{}
	most := 0
	for _, e := range log.events() {
		if e.begin {
			if e.who == "narrow" && len(running) > 0 || running["narrow"] {
				t.Errorf("%s began while %v ran: the job with limit 1 did not run alone", e.who, running)
			}
			running[e.who] = true
			most = max(most, len(running))
		} else {
			delete(running, e.who)
		}
	}
	if most < 2 {
		t.Errorf("the wide jobs never ran together (at most %d at once): the test does not exercise the limit", most)
	}
}
