package demo

import (
	"context"
	"sync"
	"time"
)

// kafka tells the Kafka story: three workers consume a topic of an
// in-process Kafka into a ledger, and one pauses inside a batch.
func (s *story) kafka(ctx context.Context) error {
	s.step("Kafka (kfake) runs in this process with a topic of %d partitions. Three workers consume it:", KafkaPartitions)
	s.detail("         each Kafka partition is a leasehold partition, owned through a lease (TTL %v); the owner", TTL)
	s.detail("         consumes it by direct assignment from the offset stored in PostgreSQL.")
	ms, err := s.startFleet(ctx)
	if err != nil {
		return err
	}
	s.step("Producing %d records. Each batch's ledger rows, the offset advance and the lease check", KafkaRecords)
	s.detail("         commit in one transaction.")

	mctx, stopMonitor := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() {
		stopMonitor()
		bg.Wait()
	}()
	bg.Go(func() { s.monitor(mctx) })
	if err := s.l.Feed(ctx, KafkaRecords, time.Second); err != nil {
		return err
	}
	if err := s.waitDone(ctx, 0, time.Minute); err != nil {
		return err
	}
	s.step("%d records applied; the stored offsets are at the log end. Producing %d more.", KafkaRecords, KafkaRecords)
	produced := make(chan error, 1)
	bg.Go(func() { produced <- s.l.Feed(mctx, KafkaRecords, time.Second) })
	if err := s.pause(ctx, ms[0], false, s.names[1], s.names[2]); err != nil {
		return err
	}
	if err := <-produced; err != nil {
		return err
	}
	if err := s.waitDone(ctx, 0, 2*time.Minute); err != nil {
		return err
	}
	stopMonitor()
	bg.Wait()
	done, _, _ := s.l.Progress(ctx)
	s.step("All %d records are applied; the stored offsets are at the log end again.", done)
	return nil
}
