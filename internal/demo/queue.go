package demo

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// queue tells the queue story: three workers, a crash and a pause.
func (s *story) queue(ctx context.Context) error {
	s.step("Three workers run in this process, each with its own connection pool (through a fault")
	s.detail("         proxy) and its own clock. They join group %q of %d partitions and claim them", Group, Partitions)
	s.detail("         with leases (TTL %v) carrying fencing tokens.", TTL)
	ms, err := s.startFleet(ctx)
	if err != nil {
		return err
	}
	s.step("Enqueuing %d jobs over %d keys. Each handler appends its job to a ledger inside", Jobs, Keys)
	s.detail("         the job's transaction, which commits only if the partition's token is current.")

	mctx, stopMonitor := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		stopMonitor()
		bg.Wait()
	}()
	bg.Go(func() { s.monitor(mctx) })
	produced := make(chan error, 1)
	bg.Go(func() { produced <- s.l.Feed(mctx, Jobs, Produce) })
	if err := s.waitDone(ctx, Jobs/5, time.Minute); err != nil {
		return err
	}
	if err := s.crash(ctx, ms[0], s.names[1], s.names[2]); err != nil {
		return err
	}
	if err := sleep(ctx, 700*time.Millisecond); err != nil {
		return err
	}
	if err := s.pause(ctx, ms[1], true, s.names[2]); err != nil {
		return err
	}
	if err := <-produced; err != nil {
		return err
	}
	if err := s.waitDone(ctx, 0, 2*time.Minute); err != nil {
		return err
	}
	// Let worker-2's rejoin show in the table; not needed for the report.
	s.waitStatus(ctx, 10*time.Second, "", func(st partition.Status) bool {
		h := holders(st)
		return heldBy(st, s.names[1], s.names[2]) && h[s.names[1]] > 0 && h[s.names[2]] > 0
	})
	if err := sleep(ctx, 300*time.Millisecond); err != nil {
		return err
	}
	stopMonitor()
	bg.Wait()
	done, _, _ := s.l.Progress(ctx)
	s.step("All %d jobs are finished. Stopping worker-2 and worker-3 gracefully.", done)
	return nil
}
