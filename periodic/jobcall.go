package periodic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/queue"
)

// jobResult is what one schedule's Job gave for the slots of a pass.
type jobResult struct {
	index int
	jobs  []queue.Job // one per slot, in the order asked
	err   error
}

// prepare calls the schedules' Job for the slots of plan to enqueue, before
// any transaction. Each schedule's calls run in a goroutine of their own,
// and prepare waits for them at most Config.JobTimeout (on Lease.Clock), or
// until ctx ends or stop closes: a schedule whose Job panics, returns
// another group, or has not returned by then (a *ScheduleError, wrapping
// ErrJobTimeout for the latter) is left out of this pass, not the others.
// While a call that timed out is still running, its schedule is left out
// at once (running), so that a Job that blocks is never called twice at a
// time. It returns the rest of plan, and the error of each schedule left
// out.
func (s *Scheduler) prepare(ctx context.Context, token fence.Token, plan []planned, stop <-chan struct{}) (
	kept []planned, failed map[int]error, running map[int]bool) {
	slots := make(map[int][]int) // schedule index -> its slots' indexes in plan
	var order []int
	for k, p := range plan {
		if p.Skip {
			continue
		}
		if _, ok := slots[p.index]; !ok {
			order = append(order, p.index)
		}
		slots[p.index] = append(slots[p.index], k)
	}
	failed, running = make(map[int]error), make(map[int]bool)
	results := make(chan jobResult, len(order)) // never blocks a call that returns late
	var launched []int
	for _, i := range order {
		first := plan[slots[i][0]].At
		if !s.calling[i].CompareAndSwap(false, true) {
			failed[i] = &ScheduleError{Index: i, Name: s.scheds[i].Name, Err: ErrJobTimeout,
				Reason: fmt.Sprintf("Job still running for an earlier slot, slot %v waits", first)}
			running[i] = true
			continue
		}
		ats := make([]time.Time, len(slots[i]))
		for n, k := range slots[i] {
			ats[n] = plan[k].At
		}
		launched = append(launched, i)
		go func() {
			r := jobResult{index: i, jobs: make([]queue.Job, 0, len(ats))}
			for _, at := range ats {
				j, err := s.job(i, at)
				if err != nil {
					r.err = err
					break
				}
				r.jobs = append(r.jobs, j)
			}
			s.calling[i].Store(false)
			results <- r
		}()
	}
	got := make(map[int]jobResult, len(launched))
	var cut error // why the wait ended before JobTimeout: the leadership ended
	if len(launched) > 0 {
		expired := make(chan struct{})
		t := s.leases.Config().Clock.AfterFunc(s.cfg.JobTimeout, func() { close(expired) })
	wait:
		for len(got) < len(launched) {
			select {
			case r := <-results:
				got[r.index] = r
			case <-expired:
				break wait
			case <-ctx.Done():
				cut = context.Cause(ctx)
				break wait
			case <-stop:
				cut = errLeadershipEnded
				break wait
			}
		}
		t.Stop()
	}
	for _, i := range launched {
		r, ok := got[i]
		switch {
		case !ok && cut != nil:
			failed[i] = &ScheduleError{Index: i, Name: s.scheds[i].Name, Err: cut,
				Reason: fmt.Sprintf("the leadership ended before Job returned for slot %v", plan[slots[i][0]].At)}
		case !ok:
			failed[i] = &ScheduleError{Index: i, Name: s.scheds[i].Name, Err: ErrJobTimeout,
				Reason: fmt.Sprintf("Job did not return within %v for slot %v", s.cfg.JobTimeout, plan[slots[i][0]].At)}
		case r.err != nil:
			failed[i] = r.err
		default:
			for n, k := range slots[i] {
				failed[i] = s.setJob(&plan[k], r.jobs[n])
				if failed[i] != nil {
					break
				}
			}
		}
		if failed[i] == nil {
			delete(failed, i)
		}
	}
	if len(failed) == 0 {
		return plan, nil, nil
	}
	kept = plan[:0:0]
	for _, p := range plan {
		if failed[p.index] == nil {
			kept = append(kept, p)
		}
	}
	for i, err := range failed {
		var mine []Slot
		for _, p := range plan {
			if p.index == i {
				mine = append(mine, p.Slot)
			}
		}
		if h := s.hooks.attempt; h != nil {
			h(token, mine, err)
		}
		s.report(token, mine, nil, err)
	}
	return kept, failed, running
}

// setJob sets p's job to j, in the scheduler's group; a job of another
// group is an error.
func (s *Scheduler) setJob(p *planned, j queue.Job) error {
	switch j.Group {
	case "":
		j.Group = s.cfg.Group
	case s.cfg.Group:
	default:
		return &ScheduleError{Index: p.index, Name: p.Schedule,
			Reason: fmt.Sprintf("Job returned the group %q, not the scheduler's %q", j.Group, s.cfg.Group)}
	}
	p.job = j
	return nil
}

// job returns the job of schedule i's slot at from its Job; a panic in
// Job is an error (the leader retries the slot after RetryDelay), not a
// crash of the process.
func (s *Scheduler) job(i int, at time.Time) (j queue.Job, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &ScheduleError{Index: i, Name: s.scheds[i].Name, Reason: fmt.Sprintf("Job panicked for slot %v: %v", at, r)}
		}
	}()
	return s.scheds[i].Job(at), nil
}

// errLeadershipEnded is the cause of a slot whose Job was still running
// when the leader's lease ended: the next leader handles the slot.
var errLeadershipEnded = errors.New("periodic: the leadership ended")
