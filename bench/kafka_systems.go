package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/worker"
)

// franz consumes every partition from offset 0 with one plain client.
func (b *kafkaBench) franz(ctx context.Context) (sample, error) {
	offs := map[int32]kgo.Offset{}
	for p := range b.ends {
		offs[p] = kgo.NewOffset().At(0)
	}
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{b.topic: offs}))
	if err != nil {
		return sample{}, err
	}
	defer cl.Close()
	var n int64
	for n < b.total() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return sample{}, fmt.Errorf("%d of %d records: %w", n, b.total(), err)
		}
		n += int64(fs.NumRecords())
	}
	return sample{ops: int(n), elapsed: time.Since(start)}, nil
}

// effects is the one-row handler's statement, shared by both systems.
const kafkaEffects = `INSERT INTO kafka_effects (topic, partition, "offset", value)
SELECT $1, $2, o, v FROM unnest($3::bigint[], $4::bytea[]) AS u(o, v)`

func insertEffects(ctx context.Context, tx pgx.Tx, topic string, p int32, recs []*kgo.Record) error {
	offs, vals := make([]int64, len(recs)), make([][]byte, len(recs))
	for i, r := range recs {
		offs[i], vals[i] = r.Offset, r.Value
	}
	_, err := tx.Exec(ctx, kafkaEffects, topic, p, offs, vals)
	return err
}

// leasehold consumes the topic with one worker running a kafka consumer,
// owning every partition, from Start until every record is committed.
func (b *kafkaBench) leasehold(ctx context.Context, group string, oneRow bool) (sample, error) {
	var mu sync.Mutex
	var first time.Time // the earliest grant: claiming the partitions is not timed
	h := func(ctx context.Context, tx pgx.Tx, bt *kafka.Batch) error {
		mu.Lock()
		if first.IsZero() || bt.Granted.Before(first) {
			first = bt.Granted
		}
		mu.Unlock()
		if oneRow {
			return insertEffects(ctx, tx, bt.Topic, bt.Partition, bt.Records)
		}
		return nil
	}
	if err := b.truncateEffects(ctx); err != nil {
		return sample{}, err
	}
	c, err := b.consumer(ctx, group, "w", h, 100*time.Millisecond, b.f.batch)
	if err != nil {
		return sample{}, err
	}
	defer stopConsumer(c)
	for c.Stats().Records < b.total() {
		select {
		case <-ctx.Done():
			return sample{}, fmt.Errorf("%d of %d records: %w", c.Stats().Records, b.total(), ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	done := time.Now()
	mu.Lock()
	elapsed := done.Sub(first)
	mu.Unlock()
	if err := b.verify(ctx, group, oneRow); err != nil {
		return sample{}, err
	}
	return sample{ops: int(c.Stats().Records), elapsed: elapsed}, nil
}

func (b *kafkaBench) truncateEffects(ctx context.Context) error {
	_, err := b.ctl.Exec(ctx, `TRUNCATE kafka_effects`)
	return err
}

// verify checks that every stored offset is at the log end and, for the
// one-row case, that every record has exactly one effect row.
func (b *kafkaBench) verify(ctx context.Context, group string, oneRow bool) error {
	db, err := lhDB(b.ctl, "")
	if err != nil {
		return err
	}
	offs, err := kafka.Offsets(ctx, db, group)
	if err != nil {
		return err
	}
	at := 0
	for _, o := range offs {
		if o.Next == b.ends[o.Partition] {
			at++
		}
	}
	if at != len(b.ends) {
		return fmt.Errorf("verify: %d of %d stored offsets at the log end", at, len(b.ends))
	}
	if oneRow {
		var n, distinct int64
		if err := b.ctl.QueryRow(ctx, `SELECT count(*), count(DISTINCT (partition, "offset")) FROM kafka_effects`).Scan(&n, &distinct); err != nil {
			return err
		}
		if n != b.total() || distinct != n {
			return fmt.Errorf("verify: %d effect rows (%d distinct) for %d records", n, distinct, b.total())
		}
	}
	return nil
}

// kafkaWorker is a leasehold worker running a Kafka consumer.
type kafkaWorker struct {
	*kafka.Consumer
	w *worker.Worker
}

// ID returns the worker's member id.
func (k *kafkaWorker) ID() string { return k.w.ID() }

// consumer starts a worker of group running a consumer of the topic.
func (b *kafkaBench) consumer(ctx context.Context, group, id string, h kafka.Handler, wait time.Duration, batch int) (*kafkaWorker, error) {
	db, err := lhDB(b.lh, "")
	if err != nil {
		return nil, err
	}
	c, err := kafka.New(db, kafka.Config{
		Topics: []string{b.topic}, Brokers: b.brokers, PartitionsPerTopic: b.f.partitions,
		Handler: h, MaxBatch: batch, FetchMaxWait: wait,
	})
	if err != nil {
		return nil, err
	}
	w, err := worker.New(db, worker.Config{Group: group, ID: id, Kafka: c, Lease: lease.Config{TTL: 5 * time.Second}})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return &kafkaWorker{Consumer: c, w: w}, nil
}

// stopConsumer stops the worker gracefully.
func stopConsumer(k *kafkaWorker) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k.w.Stop(ctx)
}

// rawSQL consumes the topic with a franz-go client and a goroutine per
// partition, sending the consumer's statements directly. The partitions'
// leases are acquired beforehand, untimed.
func (b *kafkaBench) rawSQL(ctx context.Context, group string, oneRow bool) (sample, error) {
	if _, err := b.ctl.Exec(ctx, b.sql.createGroup, group, b.f.partitions); err != nil {
		return sample{}, err
	}
	db, err := lhDB(b.ctl, "")
	if err != nil {
		return sample{}, err
	}
	lc, err := lease.New(db, lease.Config{TTL: 10 * time.Minute, Owner: "raw"})
	if err != nil {
		return sample{}, err
	}
	defer lc.Close(context.Background())
	tokens := map[int32]int64{}
	for p := range b.ends {
		l, err := lc.Acquire(ctx, partition.LeaseName(group, int(p)))
		if err != nil {
			return sample{}, err
		}
		tokens[p] = int64(l.Token())
	}
	if err := b.truncateEffects(ctx); err != nil {
		return sample{}, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(b.ends))
	for p, end := range b.ends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.rawPartition(ctx, group, p, end, tokens[p], oneRow); err != nil {
				errs <- fmt.Errorf("partition %d: %w", p, err)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return sample{}, err
	}
	if err := b.verify(ctx, group, oneRow); err != nil {
		return sample{}, err
	}
	return sample{ops: int(b.total()), elapsed: elapsed}, nil
}

func (b *kafkaBench) rawPartition(ctx context.Context, group string, p int32, end, token int64, oneRow bool) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{b.topic: {p: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return err
	}
	defer cl.Close()
	name := partition.LeaseName(group, int(p))
	var prev *int64
	for prev == nil || *prev < end {
		fs := cl.PollRecords(ctx, b.f.batch)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fs.Err(); err != nil {
			return err
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		next := recs[len(recs)-1].Offset + 1
		tx, err := b.raw.BeginTx(ctx, pgx.TxOptions{BeginQuery: kafkaBegin})
		if err != nil {
			return err
		}
		var cur int64
		var live bool
		err = tx.QueryRow(ctx, b.sql.check, name, "1000", "5000", "5000").Scan(&cur, &live)
		if err == nil && (cur != token || !live) {
			err = fmt.Errorf("lease check refused")
		}
		if err == nil && oneRow {
			err = insertEffects(ctx, tx, b.topic, p, recs)
		}
		var n int
		if err == nil {
			err = tx.QueryRow(ctx, b.sql.advance, group, b.topic, p, next, token, prev).Scan(&n)
		}
		if err == nil && n != 1 {
			err = fmt.Errorf("offset advance refused")
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			tx.Rollback(context.WithoutCancel(ctx))
			return err
		}
		prev = &next
	}
	return nil
}
