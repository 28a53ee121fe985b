package queue

import (
	"context"
	"time"
)

// The member's loop is what the Processor does once for all the
// partitions its member owns, on one goroutine that runs from its first
// grant to its last (register starts it, unregister stops it):
//
//   - every PollInterval, or sooner when the last poll saw a job come due
//     before, when a retry or snooze it recorded comes due, and shortly
//     after a partition is granted, one statement per
//     group finds which of its partitions have due jobs, and wakes them
//     (poll.go): an idle member costs that statement, whatever its
//     partition count;
//   - every PublishInterval, the running sets and the outcome counts are
//     written (running.go, record.go);
//   - every RetentionInterval, and at the first poll after it gets a
//     partition (so that a grant's old jobs do not wait an interval), the
//     finished jobs of all its partitions older than Retention are deleted
//     (retain.go); a round cut short goes on at the next poll.
//
// The partitions' own work is elsewhere, one file per stage: each
// partition's pipeline (pipeline.go) decides what to run, the member's
// fetcher (fetcher.go, fetch.go) reads the due jobs of the partitions that
// ask, in one statement, and the member's completer (completer.go) records
// their outcomes, in one fenced statement per flush.
func (p *Processor) member(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	defer p.members.Add(-1)
	poll := time.NewTimer(minPollGap)
	defer poll.Stop()
	pollAt := time.Now().Add(minPollGap)
	schedule := func(at time.Time) {
		pollAt = at
		poll.Reset(time.Until(at))
	}
	publish := time.NewTicker(p.cfg.PublishInterval)
	defer publish.Stop()
	retain := time.NewTimer(p.cfg.RetentionInterval)
	defer retain.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			schedule(p.poll(ctx))
			if p.granted() {
				retain.Reset(0)
			}
		case <-p.dueC:
			// A job comes due before the next poll (a retry or snooze
			// recorded), or a partition was granted: poll then (at least
			// minPollGap from now, so that the grants of one moment share
			// a poll).
			if at := p.takeNextDue(); !at.IsZero() && at.Before(pollAt) {
				schedule(notBefore(at, time.Now().Add(minPollGap)))
			}
		case <-publish.C:
			p.publish(ctx)
			p.writeTallies(ctx, false)
		case <-retain.C:
			next := p.cfg.RetentionInterval
			if !p.retain(ctx) {
				next = p.cfg.PollInterval // more to delete: go on soon
			}
			retain.Reset(next)
		}
	}
}

// owned returns the partitions the Processor runs now, by group.
func (p *Processor) owned() map[string][]int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	parts := make(map[string][]int32)
	for k := range p.wakes {
		parts[k.group] = append(parts[k.group], int32(k.partition))
	}
	return parts
}

// granted reports whether a partition was subscribed since it last
// reported so: one the member's retention has not covered yet.
func (p *Processor) granted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.unretained
	p.unretained = false
	return g
}

// comesDue notes that a job of the Processor's partitions comes due at at
// (a retry or snooze it recorded): the member's loop polls then, if sooner
// than its next poll.
func (p *Processor) comesDue(at time.Time) {
	p.mu.Lock()
	if p.nextDue.IsZero() || at.Before(p.nextDue) {
		p.nextDue = at
	}
	p.mu.Unlock()
	signal(p.dueC)
}

// takeNextDue returns the earliest time noted by comesDue (or a grant)
// since it was last called, zero if none.
func (p *Processor) takeNextDue() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.nextDue
	p.nextDue = time.Time{}
	return at
}

// notBefore returns at, or earliest if at is before it.
func notBefore(at, earliest time.Time) time.Time {
	if at.Before(earliest) {
		return earliest
	}
	return at
}
