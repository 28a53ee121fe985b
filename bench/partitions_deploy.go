package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// A rolling deploy: every member of a converged group, in turn, stops
// gracefully and starts again under the same id (a new incarnation), the
// next one once the group converged again. A sampler reads the group's
// status every convergePoll meanwhile: for each restart it counts, per
// partition, the time no live lease held it (from the samples: a partition
// seen unheld in one sample and held in the next counts the interval
// between them) and the grants (the partition's token changed between two
// samples: a lower bound when two grants fall between samples).

// deployRestart is one restart's measurements.
type deployRestart struct {
	took     time.Duration   // from Stop until the group converged again
	unowned  []time.Duration // per partition with any time unowned
	parts    int             // partitions of the group
	grants   int             // token changes seen
	idealMax float64         // 2 x partitions / members: the leave's and the join's moves
}

// runDeploy restarts each member of a group of f.members x f.partitions in
// turn.
func runDeploy(ctx context.Context, env *partitionsEnv, f partitionsFlags) (rs []deployRestart, err error) {
	fl, err := startedFleet(ctx, env, "deploy", f, false)
	defer func() {
		if cerr := fl.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err != nil {
		return nil, err
	}
	for i := range f.members {
		bm := fl.pick(0) // the longest running: members rejoin at the end
		s := newDeploySampler(env, fl.group)
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.run(sctx) }()
		t0 := time.Now()
		fl.remove(bm)
		serr := stopMember(ctx, bm, 15*time.Second)
		var rerr error
		if serr == nil {
			_, rerr = fl.startID(ctx, bm.id)
		}
		var d time.Duration
		if serr == nil && rerr == nil {
			d, rerr = fl.waitConverged(ctx, t0, convergeWithin)
		}
		stop()
		<-done
		switch {
		case serr != nil:
			return rs, fmt.Errorf("restart %d: stop %s: %w", i+1, bm.id, serr)
		case rerr != nil:
			return rs, fmt.Errorf("restart %d: %w", i+1, rerr)
		case s.err != nil:
			return rs, fmt.Errorf("restart %d: status: %w", i+1, s.err)
		}
		r := s.result()
		r.took, r.parts, r.idealMax = d, f.partitions, 2*float64(f.partitions)/float64(f.members)
		rs = append(rs, r)
		fmt.Fprintf(env.stderr, "  restart %2d: converged after %4.0f ms, %d partitions unowned for a while (max %3.0f ms), %d grants\n",
			i+1, ms(d), len(r.unowned), ms(quantileOf(append(r.unowned, 0), 1)), r.grants)
	}
	return rs, nil
}

// deploySampler reads a group's status until its context ends.
type deploySampler struct {
	env   *partitionsEnv
	group string

	mu      sync.Mutex
	last    map[int]partition.PartitionStatus
	lastAt  time.Time
	unowned map[int]time.Duration
	grants  int
	err     error
}

func newDeploySampler(env *partitionsEnv, group string) *deploySampler {
	return &deploySampler{env: env, group: group, unowned: map[int]time.Duration{}}
}

// run samples every convergePoll until ctx ends.
func (s *deploySampler) run(ctx context.Context) {
	db, err := lhDB(s.env.observer, "")
	if err != nil {
		s.err = err
		return
	}
	for ctx.Err() == nil {
		st, err := partition.Inspect(context.WithoutCancel(ctx), db, s.group)
		if err != nil {
			s.err = err
			return
		}
		s.take(st, time.Now())
		select {
		case <-ctx.Done():
		case <-time.After(convergePoll):
		}
	}
}

// take adds one sample.
func (s *deploySampler) take(st partition.Status, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := make(map[int]partition.PartitionStatus, len(st.Partitions))
	for _, p := range st.Partitions {
		cur[p.Partition] = p
		if prev, ok := s.last[p.Partition]; ok {
			if !prev.Held || !p.Held {
				// Unheld at either end of the interval: count half of it
				// for each unheld end (the change fell somewhere between).
				gap := at.Sub(s.lastAt)
				if !prev.Held && !p.Held {
					s.unowned[p.Partition] += gap
				} else {
					s.unowned[p.Partition] += gap / 2
				}
			}
			if p.Token != prev.Token {
				s.grants++
			}
		}
	}
	s.last, s.lastAt = cur, at
}

// result returns the restart's measurements so far.
func (s *deploySampler) result() deployRestart {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r deployRestart
	for _, d := range s.unowned {
		r.unowned = append(r.unowned, d)
	}
	slices.Sort(r.unowned)
	r.grants = s.grants
	return r
}

// deployTable is the deploy part's table: per restart, the time with no
// live owner over the group's partitions (p50, p99, max over partitions,
// unowned ones and the rest alike), and the grants against the ideal.
func deployTable(f partitionsFlags, rs []deployRestart) (ptable, []partitionsRow) {
	t := ptable{
		title: "Rolling deploy",
		notes: []string{fmt.Sprintf("%d members x %d partitions, TTL %v; each member in turn stops gracefully and starts again "+
			"under its id, the next once the group converged. Unowned = time a partition had no live lease "+
			"(partition.Inspect every %v: half an interval for a change inside it); per restart, quantiles over all "+
			"partitions; moved/ideal = grants seen / (2 x partitions / members), a lower bound.",
			f.members, f.partitions, f.ttl, convergePoll)},
		header: []string{"restarts", "converged p50 ms", "converged max ms", "unowned p99 ms (median restart)",
			"unowned p99 ms (worst restart)", "unowned max ms", "moved/ideal median", "moved/ideal max"},
	}
	var took, p99s, maxes []time.Duration
	var moved []float64
	for _, r := range rs {
		all := make([]time.Duration, r.parts)
		copy(all[r.parts-len(r.unowned):], r.unowned) // the owned-throughout partitions count as 0
		slices.Sort(all)
		took = append(took, r.took)
		p99s = append(p99s, quantileOf(all, 0.99))
		maxes = append(maxes, quantileOf(all, 1))
		moved = append(moved, float64(r.grants)/r.idealMax)
	}
	if len(rs) == 0 {
		return t, nil
	}
	slices.Sort(moved)
	t.add(fmt.Sprint(len(rs)), f0(ms(quantileOf(took, 0.5))), f0(ms(quantileOf(took, 1))),
		f0(ms(quantileOf(p99s, 0.5))), f0(ms(quantileOf(p99s, 1))), f0(ms(quantileOf(maxes, 1))),
		f2(moved[len(moved)/2]), f2(moved[len(moved)-1]))
	row := partitionsRow{System: "leasehold", Case: "rolling deploy", Partitions: f.partitions, Members: f.members,
		Samples: len(rs), P50Ms: ms(quantileOf(p99s, 0.5)), P99Ms: ms(quantileOf(p99s, 1)), MaxMs: ms(quantileOf(maxes, 1))}
	return t, []partitionsRow{row}
}
