package queue

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// PublishRound runs one round of p's publisher (tests set a long
// PublishInterval and drive it) and returns how many statements it ran.
func PublishRound(p *Processor) int {
	n, _ := p.round(context.Background())
	return n
}

// PauseSkips returns how many times p's partitions left out a fetch (or
// waited to open their run) because their group was paused.
func PauseSkips(p *Processor) int64 { return p.pauses.skips.Load() }

// PausePolls returns how many times p read its groups' pauses.
func PausePolls(p *Processor) int64 { return p.pauses.polls.Load() }

// PauseSeen reports whether p knows group (kind "") or kind of it to be
// paused.
func PauseSeen(p *Processor, group, kind string) bool {
	s := p.pauses.of(group)
	if kind == "" {
		return s != nil && s.all
	}
	return s.kind(kind)
}

// NotedCancels returns how many jobs cancel notifications named that p's
// grants did not run (noted for their pipelines).
func NotedCancels(p *Processor) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ss := range p.grants {
		for _, s := range ss {
			n += int(s.notes.Load())
		}
	}
	return n
}

// Publishers returns how many publisher goroutines of p run.
func Publishers(p *Processor) int { return int(p.members.Load()) }

// FetchedPartitions returns how many partitions' asks p's fetches have
// answered.
func FetchedPartitions(p *Processor) int64 { return p.fetched.Load() }

// Unfair turns p's fair turns between keys off (the fairness test's
// control).
func Unfair(p *Processor) { p.unfair = true }

// SlotNode is a slotNode with N=1 and default timings, for the cost test.
type SlotNode struct{ nd *slotNode }

func StartSlotNode(t *testing.T, url, id string) *SlotNode {
	return &SlotNode{startSlotNode(t, url, id, 1, 0, func(st *slotState) { st.lease = lease.Config{} })}
}

// Busy takes the slot and runs 5ms jobs on it until stop, and returns
// how many it ran.
func (s *SlotNode) Busy(stop <-chan struct{}) (runs int) {
	for {
		select {
		case <-stop:
			return runs
		default:
		}
		if sl := s.nd.tryTake(100 * time.Millisecond); sl != nil {
			time.Sleep(5 * time.Millisecond)
			sl.release()
			runs++
		}
	}
}

// CalledAt returns when w's handler was called, as its key's rate limit
// counts it (zero: its kind has no KeyRate).
func CalledAt[T Args](w *Work[T]) time.Time {
	if w.stamp == nil {
		return time.Time{}
	}
	return w.stamp.time(time.Now())
}
