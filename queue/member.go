package queue

import (
	"context"
	"time"
)

// The member's loop is what the Processor does once for all the
// partitions its member owns, on one goroutine that runs from its first
// grant to its last (register starts it, unregister stops it):
//
//   - every PollInterval, one statement per group finds which of its
//     partitions have due jobs, and wakes them (poll.go): an idle member
//     costs that statement, whatever its partition count;
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
	poll := time.NewTicker(p.cfg.PollInterval)
	defer poll.Stop()
	publish := time.NewTicker(p.cfg.PublishInterval)
	defer publish.Stop()
	retain := time.NewTimer(p.cfg.RetentionInterval)
	defer retain.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			p.poll(ctx)
			if p.granted() {
				retain.Reset(0)
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
