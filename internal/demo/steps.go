package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/partition"
)

// startFleet starts the three members and waits until they share the
// partitions.
func (s *story) startFleet(ctx context.Context) ([]*chaos.Member, error) {
	var ms []*chaos.Member
	for _, n := range s.names {
		m, err := s.l.Start(ctx, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	st, _, err := s.waitStatus(ctx, 30*time.Second, "the three workers to share the partitions", func(st partition.Status) bool {
		return heldBy(st, s.names...) && len(holders(st)) == len(s.names)
	})
	if err != nil {
		return nil, err
	}
	s.detail("%s", ownersHeader(len(st.Partitions)))
	s.showOwners(st)
	return ms, nil
}

// crash crashes member a and waits until the survivors hold every
// partition.
func (s *story) crash(ctx context.Context, a *chaos.Member, survivors ...string) error {
	before, err := s.l.Status(ctx)
	if err != nil {
		return err
	}
	mine := partitionsOf(before, a.ID)
	a.Crash()
	crashed := time.Now()
	s.step("%s CRASHES: its connections are cut, its clock and handlers freeze, and it never", a.ID)
	s.detail("         calls Stop. Its partitions %v stall until their leases expire.", mine)
	st, at, err := s.waitStatus(ctx, 30*time.Second, "the survivors to take over", func(st partition.Status) bool {
		return heldBy(st, survivors...)
	})
	if err != nil {
		return err
	}
	s.rep.FailoverMS = at.Sub(crashed).Milliseconds()
	s.step("FAILOVER: %s every partition %s after the crash, with new tokens",
		hold(survivors), secs(at.Sub(crashed)))
	if len(mine) > 0 {
		p := mine[0]
		s.detail("         (partition %d: token %d -> %d).", p, before.Partitions[p].Token, st.Partitions[p].Token)
	}
	s.showOwners(st)
	return nil
}

// pause freezes member b mid-run past its leases, waits until the others
// hold every partition, then releases b and watches the fence refuse its
// late commits. topUp feeds b's partitions if they ran dry.
func (s *story) pause(ctx context.Context, b *chaos.Member, topUp bool, others ...string) error {
	before, err := s.l.Status(ctx)
	if err != nil {
		return err
	}
	b.HoldHandlers()
	reached := func() bool { return len(b.Held()) > 0 }
	if !waitFor(ctx, time.Second, reached) {
		if topUp {
			if err := s.l.FeedPartitions(ctx, partitionsOf(before, b.ID)); err != nil {
				b.Release()
				return err
			}
		}
		if !waitFor(ctx, 20*time.Second, reached) {
			b.Release()
			return fmt.Errorf("demo: no handler of %s reached its gate", b.ID)
		}
	}
	// Let the runs already past the gate commit: a transaction frozen
	// between its fence check and its commit would hold the lease row (the
	// check locks it) and keep the takeover waiting until the database
	// timed it out. The runs held at the gate hold no lease lock.
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		b.Release()
		return err
	}
	b.Freeze()
	paused := time.Now()
	held := b.Held()
	h := held[0]
	what := fmt.Sprintf("job %d", h.Job)
	if h.Job == 0 {
		what = fmt.Sprintf("offsets %d..%d", h.First, h.Last)
	}
	s.step("%s PAUSES mid-run (think GC pause, SIGSTOP, VM migration): %s", b.ID, count(len(held), "handler has written its effect", "handlers have written their effects"))
	s.detail("         in a transaction that waits to commit (%s, partition %d, token %d%s).", what, h.Partition, h.Token, more(len(held)))
	s.detail("         Its clock stops and its connections go silent; from the inside it notices nothing.")
	st, at, err := s.waitStatus(ctx, 30*time.Second, strings.Join(others, " and ")+" to take over", func(st partition.Status) bool {
		return heldBy(st, others...)
	})
	if err != nil {
		b.Release()
		return err
	}
	s.rep.PauseTakeoverMS = at.Sub(paused).Milliseconds()
	s.step("TAKEOVER: %s every partition %s after the pause: %s's leases expired",
		hold(others), secs(at.Sub(paused)), b.ID)
	s.detail("         in the database and were granted again (partition %d: token %d -> %d).",
		h.Partition, h.Token, st.Partitions[h.Partition].Token)
	s.showOwners(st)

	fenced := b.Fenced()
	held = b.Release()
	s.step("%s RESUMES, still believing it holds its partitions: %s and", b.ID, count(len(held), "held handler returns", "held handlers return"))
	s.detail("         it goes on to commit with the old token...")
	waitFor(ctx, 20*time.Second, func() bool {
		for _, r := range held {
			if _, ok := b.Outcome(r.Job); r.Job != 0 && !ok {
				return false
			}
		}
		return b.Fenced() > fenced
	})
	refused := b.Fenced() - fenced
	s.rep.Refused += refused
	s.step("REFUSED: the fence refused %s of %s (the partition's token moved on): their",
		count(refused, "late commit", "late commits"), b.ID)
	s.detail("         effects roll back with them, and the new owner applies that work, once.")
	stood := b.ResumeClock()
	s.step("%s's clock catches up by %s: it finds its leases lost and rejoins the group.", b.ID, secs(stood))
	return nil
}

// monitor shows the progress and, whenever it changes, the ownership
// table, until ctx is done.
func (s *story) monitor(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if done, items, err := s.l.Progress(ctx); err == nil {
			s.emit(Event{Kind: Progress, Done: done, Items: items, Total: max(s.total, items)})
		}
		if st, err := s.l.Status(ctx); err == nil {
			s.showOwners(st)
		}
	}
}

// showOwners tells the ownership table's row for st unless it is the row
// told last.
func (s *story) showOwners(st partition.Status) {
	row := ownersRow(st, s.names)
	s.mu.Lock()
	defer s.mu.Unlock()
	if row != s.shown {
		s.shown = row
		s.cfg.Events(Event{Kind: Step, Text: row})
	}
}

// waitDone waits until at least n items are finished, and all of them
// when n is 0.
func (s *story) waitDone(ctx context.Context, n int, within time.Duration) error {
	var err error
	if !waitFor(ctx, within, func() bool {
		var done, items int
		done, items, err = s.l.Progress(ctx)
		return err == nil && ((n > 0 && done >= n) || (n == 0 && done == items))
	}) {
		return errors.Join(fmt.Errorf("demo: work not finished within %v", within), err, context.Cause(ctx))
	}
	return nil
}

// waitStatus polls the group's status until ok holds and returns it, with
// the time it was read. what names the wait in the error.
func (s *story) waitStatus(ctx context.Context, within time.Duration, what string, ok func(partition.Status) bool) (partition.Status, time.Time, error) {
	var st partition.Status
	var at time.Time
	var err error
	if waitFor(ctx, within, func() bool {
		st, err = s.l.Status(ctx)
		at = time.Now()
		return err == nil && ok(st)
	}) {
		return st, at, nil
	}
	return st, at, errors.Join(fmt.Errorf("demo: waited %v for %s", within, what), err, context.Cause(ctx))
}

// waitFor polls cond every 20ms until it holds (true), within passes or ctx
// is done (false).
func waitFor(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// heldBy reports whether every partition's lease is held by one of names.
func heldBy(st partition.Status, names ...string) bool {
	for _, ps := range st.Partitions {
		if !ps.Held || !slices.Contains(names, ps.Owner) {
			return false
		}
	}
	return len(st.Partitions) > 0
}

// holders counts the partitions held by each member.
func holders(st partition.Status) map[string]int {
	m := make(map[string]int)
	for _, ps := range st.Partitions {
		if ps.Held {
			m[ps.Owner]++
		}
	}
	return m
}

// partitionsOf returns the partitions name holds.
func partitionsOf(st partition.Status, name string) []int {
	var ps []int
	for _, p := range st.Partitions {
		if p.Held && p.Owner == name {
			ps = append(ps, p.Partition)
		}
	}
	return ps
}
