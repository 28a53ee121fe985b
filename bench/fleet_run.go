package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// fleetSettle is the default of --settle, how long a fleet runs after it
// is ready and before the idle window opens: longer than PostgreSQL 15 keeps an idle backend's
// transaction counts unflushed (10s), so that the start's transactions
// (a grant, its run opened, ...) are not counted in the idle window.
// Measured with 2s instead: 225 idle tx/s for a 4 x 1024 leasehold fleet
// whose statements ran at 18 a second.
const fleetSettle = 12 * time.Second

// fleetSenders is how many goroutines of the producer send the offered
// jobs, each job in a call of its own at its scheduled time: pgxpool's
// default size of the producer's pool (4 on this machine), so that one
// slow commit does not hold up the jobs due after it.
const fleetSenders = 4

// fleetSample is one system's measurements in one round at one size.
type fleetSample struct {
	members int
	settle  time.Duration // from starting the members until ready
	base    windowCost    // before the members start: the server with no client of the system
	idle    windowCost
	mem     clientMem // heap and goroutines at the idle window's end, less the baseline
	conns   int       // the members' server connections at the idle window's end
	load    fleetLoad
}

// fleetLoad is one load window: jobs offered at rate, one Enqueue each.
type fleetLoad struct {
	rate       float64 // offered jobs per second
	cost       windowCost
	enqueued   int64           // Enqueue calls that succeeded
	finished   int64           // jobs whose handler returned within the window
	unfinished int64           // enqueued jobs not finished after the drain
	lat        []time.Duration // each finished job's enqueue-to-handler-return time, sorted
}

// achieved returns the finished jobs per second of the window.
func (l fleetLoad) achieved() float64 { return perSec(int(l.finished), l.cost.elapsed) }

// quantile returns the latency at q, nearest rank.
func (l fleetLoad) quantile(q float64) time.Duration { return sample{lat: l.lat}.quantile(q) }

// fleetSizeResult is every round's samples of both systems at one size.
type fleetSizeResult struct {
	size    fleetSize
	samples map[string][]fleetSample // by system name
}

// runSize runs the rounds of size, the systems in alternating order.
func (e *fleetEnv) runSize(ctx context.Context, f fleetFlags, size fleetSize) (fleetSizeResult, error) {
	res := fleetSizeResult{size: size, samples: map[string][]fleetSample{}}
	for round := range f.rounds {
		for _, sys := range e.systemsOf(round) {
			fmt.Fprintf(e.stderr, "fleet %s round %d/%d: %s ...\n", size, round+1, f.rounds, sys.name())
			s, err := e.runOnce(ctx, f, sys, size, round)
			if err != nil {
				return res, fmt.Errorf("%s round %d: %w", sys.name(), round+1, err)
			}
			l := s.load
			fmt.Fprintf(e.stderr, "  no clients %.3f cores; ready in %v; idle %.1f tx/s, server %.3f cores; load %.0f jobs/s, p50 %.1fms p99 %.1fms, "+
				"%.0f µs server CPU/job, %.2f tx/job; %.1f connections per idle member\n", cores(s.base), s.settle.Round(time.Millisecond),
				perSec(int(s.idle.xacts), s.idle.elapsed), cores(s.idle), l.achieved(), ms(l.quantile(0.5)),
				ms(l.quantile(0.99)), perJob(l.cost.cpu.Seconds()*1e6, l.finished), perJob(float64(l.cost.xacts), l.finished), float64(s.conns)/float64(s.members))
			res.samples[sys.name()] = append(res.samples[sys.name()], s)
		}
	}
	return res, nil
}

// cores returns the server's CPU use in a window, in cores.
func cores(c windowCost) float64 {
	if c.elapsed <= 0 {
		return 0
	}
	return c.cpu.Seconds() / c.elapsed.Seconds()
}

// perJob returns x per finished job, 0 for none.
func perJob(x float64, jobs int64) float64 {
	if jobs == 0 {
		return 0
	}
	return x / float64(jobs)
}

// runOnce starts sys's fleet of size, measures the idle and the load
// window, drains, stops the fleet and resets the system's tables.
func (e *fleetEnv) runOnce(ctx context.Context, f fleetFlags, sys fleetSystem, size fleetSize, round int) (s fleetSample, err error) {
	s.members = size.members
	if f.baseline > 0 {
		// The server's own idle cost (its background processes, and the
		// vacuuming of the previous fleet's tables) is in every idle
		// window: measured here, it can be told apart.
		if s.base, err = e.window(ctx, sys.dbName(), f.baseline); err != nil {
			return s, err
		}
	}
	m0 := readClientMem()
	began := time.Now()
	defer func() {
		err = errors.Join(err, sys.stop(ctx))
		err = errors.Join(err, sys.reset(context.WithoutCancel(ctx)))
	}()
	if err := sys.start(ctx, size, round); err != nil {
		return s, err
	}
	s.settle = time.Since(began)
	if err := sleepCtx(ctx, e.f.settle); err != nil {
		return s, err
	}
	if s.idle, err = e.window(ctx, sys.dbName(), f.idle); err != nil {
		return s, err
	}
	if s.conns, err = e.memberConns(ctx, sys.dbName()); err != nil {
		return s, err
	}
	m1 := readClientMem()
	s.mem = clientMem{heap: m1.heap - min(m0.heap, m1.heap), goroutines: m1.goroutines - m0.goroutines}
	s.load, err = e.loadWindow(ctx, f, sys, f.rate, f.load)
	return s, err
}

// memberConns counts the server connections of the members' pools to db
// (every pool a member opens, its own and leasehold's derived ones,
// carries its pool's application_name; the producers' and the bench's own
// are left out).
func (e *fleetEnv) memberConns(ctx context.Context, db string) (int, error) {
	var n int
	err := e.srv.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1
		AND application_name LIKE 'leasehold-bench-queue-fleet-%' AND application_name NOT LIKE '%producer%'`, db).Scan(&n)
	return n, err
}

// window measures what the server spends in d with nothing done meanwhile
// (db's transactions and statements).
func (e *fleetEnv) window(ctx context.Context, db string, d time.Duration) (windowCost, error) {
	r, err := e.readServer(ctx, db)
	if err != nil {
		return windowCost{}, err
	}
	if err := sleepCtx(ctx, d); err != nil {
		return windowCost{}, err
	}
	return e.since(ctx, r)
}

// loadWindow offers jobs to sys at rate for d, measures the server's cost
// meanwhile and the jobs finished by the end, then waits for the backlog
// (at most --drain-timeout) and collects the latencies.
func (e *fleetEnv) loadWindow(ctx context.Context, f fleetFlags, sys fleetSystem, rate float64, d time.Duration) (fleetLoad, error) {
	l := fleetLoad{rate: rate}
	tr := sys.jobs().track(max(1, int(rate*d.Seconds())))
	r0, err := e.readServer(ctx, sys.dbName())
	if err != nil {
		return l, err
	}
	err = offer(ctx, sys, tr, rate, d)
	l.finished = tr.done.Load()
	l.enqueued = tr.enqueued.Load()
	if err != nil {
		return l, fmt.Errorf("producer: %w", err)
	}
	if l.cost, err = e.since(ctx, r0); err != nil {
		return l, err
	}
	deadline := time.Now().Add(f.drainTimeout)
	for tr.done.Load() < l.enqueued && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return l, err
		}
	}
	l.unfinished = l.enqueued - tr.done.Load()
	if l.unfinished > 0 {
		fmt.Fprintf(e.stderr, "  %s: %d jobs still unfinished %v after the window\n", sys.name(), l.unfinished, f.drainTimeout)
	}
	l.lat = tr.latencies()
	return l, nil
}

// offer enqueues the tracker's jobs, job i at i/rate seconds from now,
// each in an Enqueue of its own, from fleetSenders goroutines; it returns
// after d (jobs the senders are too late for are not sent) or when one
// failed.
func offer(ctx context.Context, sys fleetSystem, tr *fleetTracker, rate float64, d time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := int64(len(tr.enq))
	start := time.Now()
	return eachMember(fleetSenders, func(int) error {
		for {
			i := tr.claimed.Add(1) - 1
			if i >= n || time.Since(start) >= d {
				return nil
			}
			if err := sleepCtx(ctx, time.Until(start.Add(time.Duration(float64(i)/rate*float64(time.Second))))); err != nil {
				return err
			}
			tr.enq[i] = time.Now().UnixNano()
			if err := sys.enqueue(ctx, tr.base+i); err != nil {
				cancel()
				return err
			}
			tr.enqueued.Add(1)
		}
	})
}

// fleetMaxRate is the outcome of the --max-rate search for one system.
type fleetMaxRate struct {
	System string        `json:"system"`
	Case   string        `json:"case"` // the fleet size
	Rate   float64       `json:"max_rate"`
	Steps  []fleetMRStep `json:"steps"`
}

// fleetMRStep is one step of the search: a load window at Offered.
type fleetMRStep struct {
	Offered  float64 `json:"offered"`
	Achieved float64 `json:"achieved"`
	P99Ms    float64 `json:"p99_ms"`
	Pass     bool    `json:"pass"`
}

// searchMaxRate finds the highest rate sys sustains at --max-rate-size:
// finished jobs at least 95% of those offered and p99 below --max-rate-p99.
// It doubles from --max-rate-start until a rate fails (or --max-rate-cap),
// then bisects four times between the last pass and the first failure.
func (e *fleetEnv) searchMaxRate(ctx context.Context, f fleetFlags, sys fleetSystem) (mr fleetMaxRate, err error) {
	size := f.maxRateSize
	mr = fleetMaxRate{System: sys.name(), Case: size.String()}
	defer func() {
		err = errors.Join(err, sys.stop(ctx))
		err = errors.Join(err, sys.reset(context.WithoutCancel(ctx)))
	}()
	if err := sys.start(ctx, size, -1); err != nil {
		return mr, err
	}
	if err := sleepCtx(ctx, e.f.settle); err != nil {
		return mr, err
	}
	step := func(rate float64) (bool, error) {
		l, err := e.loadWindow(ctx, f, sys, rate, f.maxRateWindow)
		if err != nil {
			return false, err
		}
		st := fleetMRStep{Offered: rate, Achieved: l.achieved(), P99Ms: ms(l.quantile(0.99))}
		st.Pass = st.Achieved >= 0.95*rate && l.quantile(0.99) < f.maxRateP99 && l.unfinished == 0
		fmt.Fprintf(e.stderr, "fleet max-rate %s %s: offered %.0f/s, finished %.0f/s, p99 %.1fms, pass %v\n",
			sys.name(), size, rate, st.Achieved, st.P99Ms, st.Pass)
		mr.Steps = append(mr.Steps, st)
		return st.Pass, nil
	}
	lo, hi := 0.0, 0.0
	for rate := f.maxRateStart; rate <= f.maxRateCap; rate *= 2 {
		ok, err := step(rate)
		if err != nil {
			return mr, err
		}
		if !ok {
			hi = rate
			break
		}
		lo = rate
	}
	for i := 0; i < 4 && hi > 0; i++ {
		mid := (lo + hi) / 2
		ok, err := step(mid)
		if err != nil {
			return mr, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	mr.Rate = lo
	return mr, nil
}
