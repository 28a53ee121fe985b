package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// The fair case (fairness between tenants sharing a partition): tenant A
// has --fair-jobs (100,000) jobs of its one key, fairKeyA, enqueued
// (untimed) before the system starts; from time zero, while A's backlog
// drains, tenant B enqueues one job of its one key every --fair-every
// (100ms) for --duration, B's key chosen in A's partition (fairKeyB). Every
// handler sleeps 10ms. Measured: each B job's wait, from right after its
// insert returned (committed) until its handler started (time.Now() in the
// handler; both on this process's clock); and A's throughput, A's jobs
// whose completion committed within B's window over the window. River runs
// the same jobs in its default queue (it has no keys). A B job not started
// by the cap (--fair-cap, default twice --duration, from time zero) counts
// as started at the cap: a lower bound, and the sample is marked short.

// fairKeyA is tenant A's key, fairKeyB's prefix tenant B's.
const (
	fairKeyA = "tenant-a"
	fairKeyB = "tenant-b"
)

// fairTargetMs is the fair case's target: leasehold's B p99 wait below
// this many milliseconds.
const fairTargetMs = 100.0

// fairBKey returns tenant B's key for a group of partitions partitions:
// fairKeyB if it falls in fairKeyA's partition (partition.Of), else the
// first of fairKeyB-1, fairKeyB-2, ... that does.
func fairBKey(partitions int) string {
	want := partition.OfString(fairKeyA, partitions)
	if partition.OfString(fairKeyB, partitions) == want {
		return fairKeyB
	}
	for i := 1; ; i++ {
		if k := fairKeyB + "-" + strconv.Itoa(i); partition.OfString(k, partitions) == want {
			return k
		}
	}
}

// fairBJobs returns how many B jobs a window of d holds at one every
// every: the first at every, the last at most at d.
func fairBJobs(d, every time.Duration) int { return max(int(d/every), 1) }

// fair measures sys on the fair case: A's backlog of nA jobs, B's jobs one
// per --fair-every for d. Its sample's latencies are B's waits (sorted),
// its ops A's jobs completed within B's window, its elapsed the window.
func (q *queueBench) fair(ctx context.Context, sys queueSystem, nA int, d time.Duration) (sample, error) {
	if err := sys.reset(ctx); err != nil {
		return sample{}, fmt.Errorf("set up: %w", err)
	}
	// A's backlog, untimed, remembering its last id: B's jobs, inserted
	// after A's committed, have larger ids.
	var lastA int64 = math.MinInt64
	for first := 0; first < nA; first += q.f.enqueueBatch {
		ids, err := sys.enqueue(ctx, caseFair, first, min(q.f.enqueueBatch, nA-first))
		if err != nil {
			return sample{}, fmt.Errorf("set up: enqueue A's backlog: %w", err)
		}
		for _, id := range ids {
			lastA = max(lastA, id)
		}
	}
	if err := sys.checkpoint(ctx); err != nil {
		return sample{}, err
	}
	nB := fairBJobs(d, q.f.fairEvery)
	st := newFairStarts(nA, nB)
	b := newBurn(math.MaxInt32, q.f.partitions)
	b.track = true
	run, err := sys.start(ctx, caseFair, b, st.started)
	if err != nil {
		return sample{}, err
	}
	s0 := startSample(b) // time zero
	if err := run.open(); err != nil {
		stopRun(ctx, run)
		return sample{}, err
	}
	// B: job j (number nA+j) at time zero + (j+1) x every, or right after
	// the previous insert if that returned later.
	enq := make([]time.Time, nB)
	for j := 0; err == nil && j < nB; j++ {
		if err = sleepCtx(ctx, time.Until(b.start.Add(time.Duration(j+1)*q.f.fairEvery))); err != nil {
			break
		}
		if err = sys.enqueueOne(ctx, caseFair, nA+j); err != nil {
			err = fmt.Errorf("enqueue B's job %d: %w", j, err)
			break
		}
		enq[j] = time.Now() // the insert has returned: committed
	}
	windowEnd := time.Now()
	// Wait for B's last jobs to start, up to the cap.
	cut := b.start.Add(q.f.fairCap(d))
	for err == nil && !st.all() && time.Now().Before(cut) {
		err = sleepCtx(ctx, time.Millisecond)
	}
	b.stopped.Store(true)
	end := time.Now()
	cpu, allocs, gc := processCPU()-s0.cpu, mallocs()-s0.allocs, gcCPU()-s0.gcCPU
	if serr := stopRun(ctx, run); err == nil {
		err = serr
	}
	if err != nil {
		return sample{}, err
	}
	starts, twice := st.snapshot()
	if twice > 0 {
		return sample{}, fmt.Errorf("%w: %d B jobs started more than once", errCheck, twice)
	}
	lat, short := fairWaits(enq, starts, end)
	smp := sample{
		ops:     fairACompleted(b.completions(), lastA, windowEnd),
		elapsed: windowEnd.Sub(b.start),
		lat:     lat,
		short:   short,
		cpu:     cpu, allocs: allocs, gcCPU: gc,
	}
	return smp, q.check(ctx, sys, caseFair, nA+nB, smp, false)
}

// fairStarts records when B's jobs started (numbers nA..nA+nB-1), from
// the handlers.
type fairStarts struct {
	nA, nB int
	mu     sync.Mutex
	at     []time.Time
	count  int // B jobs started at least once
	twice  int // B starts beyond the first
}

func newFairStarts(nA, nB int) *fairStarts {
	return &fairStarts{nA: nA, nB: nB, at: make([]time.Time, nB)}
}

// started is the handlers' callback: job n started now (A's jobs are
// ignored).
func (s *fairStarts) started(n int) {
	now := time.Now()
	j := n - s.nA
	if j < 0 || j >= s.nB {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at[j].IsZero() {
		s.twice++
		return
	}
	s.at[j] = now
	s.count++
}

// all reports whether every B job started.
func (s *fairStarts) all() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count == s.nB
}

// snapshot returns the start times (zero: not started) and the repeated
// starts.
func (s *fairStarts) snapshot() ([]time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at), s.twice
}

// fairWaits returns B's waits, sorted: start minus enqueue for each job
// enqueued (a zero enq: not enqueued, left out), a job not started
// counting as started at cut (short reports that one did).
func fairWaits(enq, start []time.Time, cut time.Time) (lat []time.Duration, short bool) {
	for j, e := range enq {
		if e.IsZero() {
			continue
		}
		s := start[j]
		if s.IsZero() {
			s, short = cut, true
		}
		lat = append(lat, s.Sub(e))
	}
	slices.Sort(lat)
	return lat, short
}

// fairACompleted counts A's jobs (ids up to lastA) among the completions
// observed by end.
func fairACompleted(done []completion, lastA int64, end time.Time) int {
	n := 0
	for _, c := range done {
		if c.id <= lastA && !c.at.After(end) {
			n++
		}
	}
	return n
}

// fairTable returns the fair case's table, if it ran: per system, B's
// wait (p50, p99, max: medians over the rounds, the p99's min–max and each
// round's p99) and A's jobs/s (median and min–max), with leasehold's B p99
// against the target.
func fairTable(all []*series) []ptable {
	t := ptable{
		title: fmt.Sprintf("fair: tenant B's wait while tenant A's backlog drains in the same partition (target: "+
			"leasehold B p99 under %.0f ms)", fairTargetMs),
		notes: []string{
			"B wait: from right after B's insert returned (committed) until its handler started, both on this " +
				"process's clock; p50/p99/max are medians over the rounds, min–max the spread of the per-round p99",
			"A jobs/s: A's jobs whose completion committed within B's window, over the window",
		},
		header: []string{"system", "B jobs", "B p50 ms", "B p99 ms", "p99 min–max", "B max ms", "B p99 per round",
			"A jobs/s", "A min–max", "verdict"},
	}
	found, cut := false, false
	for _, s := range all {
		if s.kase != caseFair || len(s.samples) == 0 {
			continue
		}
		found = true
		var p50, p99, mx, jobs, rates []float64
		var rounds []string
		for _, x := range s.samples {
			mark := ""
			if x.short {
				mark, cut = "*", true
			}
			p50 = append(p50, ms(x.quantile(0.5)))
			p99 = append(p99, ms(x.quantile(0.99)))
			mx = append(mx, ms(x.quantile(1)))
			jobs = append(jobs, float64(len(x.lat)))
			rates = append(rates, x.rate())
			rounds = append(rounds, f1(ms(x.quantile(0.99)))+mark)
		}
		verdict := "-"
		if s.system == sysQueueLeasehold || s.system == sysQueueLimits {
			verdict = fmt.Sprintf("p99 %.1f ms: ok", median(p99))
			if median(p99) >= fairTargetMs {
				verdict = fmt.Sprintf("p99 %.1f ms: ABOVE %.0f ms", median(p99), fairTargetMs)
			}
			if slices.Min(p99) < fairTargetMs && fairTargetMs < slices.Max(p99) {
				verdict += "; target within the spread"
			}
		}
		t.add(s.system, f0(median(jobs)), f1(median(p50)), f1(median(p99)),
			f1(slices.Min(p99))+"–"+f1(slices.Max(p99)), f1(median(mx)), strings.Join(rounds, " "),
			f0(median(rates)), f0(slices.Min(rates))+"–"+f0(slices.Max(rates)), verdict)
	}
	if !found {
		return nil
	}
	if cut {
		t.notes = append(t.notes, "* a B job had not started by the cap (--fair-cap from time zero, default twice "+
			"--duration): it counts as started at the cap (a lower bound)")
	}
	return []ptable{t}
}
