package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// gatedMember is the workers of one measurement: a partition.Member owning
// every partition of a group, each partition's Run a queue.Processor's Run
// that first waits at a gate (so that claiming partitions is not timed),
// and the Processor's Listen beside it. The queue and batch suites run
// leasehold this way.
type gatedMember struct {
	m        *partition.Member
	gate     chan struct{}
	unlisten context.CancelFunc
	listened chan struct{}
}

// startGated starts a gatedMember of group (partitions partitions, member
// id) running proc, and returns once the Member owns every partition and
// each Run waits at the gate (at most 30s). wrap, if not nil, derives each
// Run's context. The Member is started under the profile labels, whose
// goroutines inherit them.
func startGated(ctx context.Context, db *leasehold.DB, proc *queue.Processor, group string, partitions int, id string,
	wrap func(context.Context, partition.Ownership) context.Context, labels pprof.LabelSet) (*gatedMember, error) {
	lctx, unlisten := context.WithCancel(context.WithoutCancel(ctx))
	g := &gatedMember{gate: make(chan struct{}), unlisten: unlisten, listened: make(chan struct{})}
	go func() {
		defer close(g.listened)
		proc.Listen(lctx)
	}()
	var waiting atomic.Int32
	var err error
	g.m, err = partition.New(db, partition.Config{Group: group, Partitions: partitions, ID: id,
		Run: func(ctx context.Context, o partition.Ownership) {
			if wrap != nil {
				ctx = wrap(ctx, o)
			}
			waiting.Add(1)
			select {
			case <-g.gate:
			case <-ctx.Done():
				waiting.Add(-1)
				return
			}
			proc.Run(ctx, o)
		},
	})
	if err != nil {
		unlisten()
		<-g.listened
		return nil, err
	}
	pprof.Do(ctx, labels, func(ctx context.Context) { err = g.m.Start(ctx) })
	if err != nil {
		unlisten()
		<-g.listened
		return nil, fmt.Errorf("start member: %w", err)
	}
	for t0 := time.Now(); len(g.m.Owned()) < partitions || int(waiting.Load()) < partitions; {
		err := sleepCtx(ctx, 5*time.Millisecond)
		if err == nil && time.Since(t0) > 30*time.Second {
			err = fmt.Errorf("the member holds %d of %d partitions after 30s (err %v)", len(g.m.Owned()), partitions, g.m.Err())
		}
		if err != nil {
			g.stop(ctx)
			return nil, err
		}
	}
	return g, nil
}

// open lets the Runs begin.
func (g *gatedMember) open() error { close(g.gate); return nil }

// stop stops the Member (runs in flight finish and are recorded) and the
// Listen, within 60s of its own.
func (g *gatedMember) stop(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	defer func() { g.unlisten(); <-g.listened }()
	if err := g.m.Stop(sctx); err != nil {
		return fmt.Errorf("stop member: %w", err)
	}
	return nil
}
