package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// fleetSystem is one system of the fleet suite: a fleet of members that
// it starts, feeds one job at a time, stops and resets.
type fleetSystem interface {
	// name is "leasehold" or "river".
	name() string
	// dbName is the system's database, whose statistics are its cost.
	dbName() string
	// start starts size.members members and returns once they are ready:
	// leasehold's group has every partition held by a live owner.
	start(ctx context.Context, size fleetSize, round int) error
	// enqueue enqueues job n, one call, on the producer's own pool.
	enqueue(ctx context.Context, n int64) error
	// stop stops every member gracefully, within a bound.
	stop(ctx context.Context) error
	// reset empties the system's tables; its members are stopped.
	reset(ctx context.Context) error
	// jobs is where the system's handlers report finished jobs.
	jobs() *fleetJobs
}

// fleetArgs is the suite's one kind of job, for both systems: N numbers
// it within the run.
type fleetArgs struct {
	N int64 `json:"n"`
}

// Kind names the kind.
func (fleetArgs) Kind() string { return "fleet.sleep" }

// fleetJobs routes the handlers' finishes to the current load window.
type fleetJobs struct {
	cur  atomic.Pointer[fleetTracker]
	next atomic.Int64 // the first job number not yet handed to a tracker
}

// finished records that the handler of job n returned now.
func (j *fleetJobs) finished(n int64) {
	if t := j.cur.Load(); t != nil {
		t.finish(n, time.Now())
	}
}

// track starts a tracker of up to capacity jobs and makes it current.
func (j *fleetJobs) track(capacity int) *fleetTracker {
	t := &fleetTracker{base: j.next.Add(int64(capacity)) - int64(capacity),
		enq: make([]int64, capacity), fin: make([]atomic.Int64, capacity)}
	j.cur.Store(t)
	return t
}

// fleetTracker times the jobs of one load window: when each Enqueue began
// and when its handler first returned, in Unix nanoseconds.
type fleetTracker struct {
	base     int64 // the job number of index 0
	enq      []int64
	fin      []atomic.Int64
	claimed  atomic.Int64 // indexes taken by the producer's senders
	done     atomic.Int64 // jobs whose handler returned
	enqueued atomic.Int64 // Enqueue calls that returned without an error
}

// finish records job n's first handler return at t (a rerun, after a
// handoff, counts once).
func (t *fleetTracker) finish(n int64, at time.Time) {
	i := n - t.base
	if i < 0 || i >= int64(len(t.fin)) {
		return
	}
	if t.fin[i].CompareAndSwap(0, at.UnixNano()) {
		t.done.Add(1)
	}
}

// latencies returns, sorted, each finished job's time from the start of
// its Enqueue call until its handler returned.
func (t *fleetTracker) latencies() []time.Duration {
	var lat []time.Duration
	for i := range t.enq {
		if f := t.fin[i].Load(); f != 0 && t.enq[i] != 0 {
			lat = append(lat, time.Duration(f-t.enq[i]))
		}
	}
	slices.Sort(lat)
	return lat
}

// eachMember runs f for members 0..n-1 at once and joins their errors.
func eachMember(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopBound bounds each member's graceful stop.
const stopBound = 30 * time.Second

// stopper is a member: a leasehold worker or a River client.
type stopper interface {
	comparable
	Stop(ctx context.Context) error
}

// stopMembers stops members at once (a zero one was not started), each
// under a context bounded by stopBound, then closes its pool (nil: not
// opened).
func stopMembers[M stopper](ctx context.Context, members []M, pools []*pgxpool.Pool) error {
	return eachMember(len(pools), func(i int) error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopBound)
		defer cancel()
		var err error
		var zero M
		if members[i] != zero {
			err = members[i].Stop(sctx)
		}
		if pools[i] != nil {
			pools[i].Close()
		}
		return err
	})
}
