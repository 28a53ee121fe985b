package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue/kafka"
)

func init() {
	register(suite{
		name: "kafka",
		summary: "queue/kafka consuming a topic into PostgreSQL (no-op and one-row handlers) against plain franz-go " +
			"and the same SQL raw; grant-to-first-record latency",
		run: runKafka,
	})
}

// The kafka suite's systems.
const (
	sysFranz        = "franz-go"         // plain consumption, no database
	sysKafkaLH      = "leasehold"        // queue/kafka, FetchMaxWait 100ms (default)
	sysKafkaLHWait5 = "leasehold-wait5s" // queue/kafka with franz-go's default FetchMaxWait (handoff case)
	sysKafkaRaw     = "raw-sql"          // a franz-go client per partition, the consumer's statements sent raw
)

// kafkaBench is one run of the kafka suite.
type kafkaBench struct {
	f       kafkaFlags
	brokers []string
	topic   string
	ends    map[int32]int64 // log end per partition
	ctl     *pgxpool.Pool
	lh, raw *pgxpool.Pool // the systems' pools: same size
	sql     kafkaSQL
	seq     int
	stderr  io.Writer
}

func runKafka(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseKafkaFlags(args, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	b, version, where, cleanup, err := openKafkaBench(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(stderr, "kafka suite: PostgreSQL %s, %s; %s\n", version, where, f.settings())

	systems := map[string][]string{
		"noop":    {sysFranz, sysKafkaLH, sysKafkaRaw},
		"one-row": {sysKafkaLH, sysKafkaRaw},
		"handoff": {sysKafkaLH, sysKafkaLHWait5},
	}
	var all []*series
	index := map[[2]string]*series{}
	for _, c := range f.cases {
		for _, sys := range systems[c] {
			s := &series{system: sys, kase: c}
			all = append(all, s)
			index[[2]string{sys, c}] = s
		}
	}
	for r := 1; r <= f.rounds; r++ {
		for _, c := range f.cases {
			order := slices.Clone(systems[c])
			if r%2 == 0 {
				slices.Reverse(order)
			}
			for _, sys := range order {
				mctx, cancel := context.WithTimeout(ctx, f.duration)
				smp, err := b.one(mctx, sys, c)
				cancel()
				if err != nil {
					return fmt.Errorf("round %d, %s on %s: %w", r, c, sys, err)
				}
				index[[2]string{sys, c}].samples = append(index[[2]string{sys, c}].samples, smp)
				fmt.Fprintf(stderr, "  r%d %-8s %-17s %7d ops %9.0f ops/s  p50 %7.2f ms  p99 %7.2f ms\n",
					r, c, sys, smp.ops, smp.rate(), ms(smp.quantile(0.5)), ms(smp.quantile(0.99)))
			}
		}
	}
	rep := newReport("kafka", f.rounds, all, sysKafkaLH, sysKafkaRaw)
	for _, res := range rep.Results { // leasehold over plain franz-go as well
		if res.System == sysFranz && res.JobsPerSec > 0 {
			for _, l := range rep.Results {
				if l.System == sysKafkaLH && l.Case == res.Case {
					rep.Ratios[res.Case+"/franz-go"] = l.JobsPerSec / res.JobsPerSec
				}
			}
		}
	}
	delete(rep.Ratios, "handoff") // a latency case: no rate ratio
	printTables(stdout, "kafka", machineLine(version+" ("+where+")", f.settings(), began), f.markdown, kafkaTables(rep, all))
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "kafka suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// kafkaTables returns the throughput table, the ratios and the handoff
// latencies.
func kafkaTables(rep Report, all []*series) []ptable {
	thr := ptable{
		title: "Throughput: records/s from offset 0 to the log end (medians over rounds)",
		notes: []string{
			"franz-go: one client consuming every partition, no database; leasehold: queue/kafka, one member owning every " +
				"partition, each batch a fenced transaction advancing the stored offset; raw-sql: a franz-go client and a " +
				"goroutine per partition sending the consumer's statements (BEGIN with the fence's timeouts, lease check, " +
				"effects, offset advance, COMMIT) directly",
			"noop: no effects; one-row: one ledger row per record (one INSERT ... unnest per batch)",
		},
		header: []string{"case", "system", "records", "records/s", "records/s per round"},
	}
	lat := ptable{
		title: "Handoff: time from lease grant to the first record in the handler",
		notes: []string{"a second worker joins and leaves repeatedly while a slow handler (50 ms per 1-record batch) keeps a backlog " +
			"in every partition; one sample per grant"},
		header: []string{"system", "grants", "p50 ms", "p99 ms", "max ms"},
	}
	for i, s := range all {
		r := rep.Results[i]
		var rounds []string
		var ops []float64
		for _, x := range s.samples {
			rounds = append(rounds, f0(x.rate()))
			ops = append(ops, float64(x.ops))
		}
		if r.Case == "handoff" {
			var m sample
			for _, x := range s.samples {
				m = m.merge(x)
			}
			lat.add(r.System, fmt.Sprint(len(m.lat)), f1(ms(m.quantile(0.5))), f1(ms(m.quantile(0.99))), f1(ms(m.quantile(1))))
			continue
		}
		thr.add(r.Case, r.System, f0(median(ops)), f0(r.JobsPerSec), strings.Join(rounds, " "))
	}
	ratios := ptable{title: "Ratios (median records/s)", header: []string{"case", "ratio"}}
	keys := make([]string, 0, len(rep.Ratios))
	for k := range rep.Ratios {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := k + " leasehold/raw-sql"
		if c, ok := strings.CutSuffix(k, "/franz-go"); ok {
			name = c + " leasehold/franz-go"
		}
		ratios.add(name, f2(rep.Ratios[k]))
	}
	out := []ptable{}
	if len(thr.rows) > 0 {
		out = append(out, thr, ratios)
	}
	if len(lat.rows) > 0 {
		out = append(out, lat)
	}
	return out
}

// one measures case c on system sys.
func (b *kafkaBench) one(ctx context.Context, sys, c string) (sample, error) {
	b.seq++
	group := fmt.Sprintf("bench-kafka-%d", b.seq)
	switch {
	case c == "handoff":
		wait := 100 * time.Millisecond
		if sys == sysKafkaLHWait5 {
			wait = 5 * time.Second
		}
		return b.handoff(ctx, group, wait)
	case sys == sysFranz:
		return b.franz(ctx)
	case sys == sysKafkaLH:
		return b.leasehold(ctx, group, c == "one-row")
	default:
		return b.rawSQL(ctx, group, c == "one-row")
	}
}

func (b *kafkaBench) total() int64 {
	var n int64
	for _, e := range b.ends {
		n += e
	}
	return n
}

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

// leasehold consumes the topic with one queue/kafka member owning every
// partition, from Start until every record is committed.
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
	offs, err := kafka.Offsets(ctx, b.ctl, "", group)
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

func (b *kafkaBench) consumer(ctx context.Context, group, id string, h kafka.Handler, wait time.Duration, batch int) (*kafka.Consumer, error) {
	c, err := kafka.New(b.lh, kafka.Config{
		Group: group, Topics: []string{b.topic}, Brokers: b.brokers, PartitionsPerTopic: b.f.partitions,
		ID: id, Handler: h, MaxBatch: batch, FetchMaxWait: wait,
		Lease:  lease.Config{TTL: 5 * time.Second},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func stopConsumer(c *kafka.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.Stop(ctx)
}

// rawSQL consumes the topic with a franz-go client and a goroutine per
// partition, sending the consumer's statements directly. The partitions'
// leases are acquired beforehand, untimed.
func (b *kafkaBench) rawSQL(ctx context.Context, group string, oneRow bool) (sample, error) {
	if _, err := b.ctl.Exec(ctx, b.sql.createGroup, group, b.f.partitions); err != nil {
		return sample{}, err
	}
	lc, err := lease.New(b.ctl, lease.Config{TTL: 10 * time.Minute, Owner: "raw", Logger: slog.New(slog.DiscardHandler)})
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

// handoff measures the time from grant to first record: worker a owns
// every partition; worker b joins and leaves handoffs times. A slow handler
// (50ms per 1-record batch) keeps a backlog in every partition.
func (b *kafkaBench) handoff(ctx context.Context, group string, wait time.Duration) (sample, error) {
	var mu sync.Mutex
	seen := map[int64]bool{} // tokens whose first batch arrived
	var lat []time.Duration
	h := func(ctx context.Context, tx pgx.Tx, bt *kafka.Batch) error {
		mu.Lock()
		if !seen[int64(bt.Token)] {
			seen[int64(bt.Token)] = true
			lat = append(lat, time.Since(bt.Granted))
		}
		mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return nil
	}
	// settled waits until every partition is owned by its desired owner
	// among cs (partition.Assign over their ids) and each grant delivered
	// its first record.
	settled := func(cs ...*kafka.Consumer) error {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.ID()
		}
		owners, err := partition.Assign(ids, b.f.partitions)
		if err != nil {
			return err
		}
		want := map[string]int{}
		for _, o := range owners {
			want[o]++
		}
		for {
			ok := true
			for _, c := range cs {
				owned := c.Stats().Owned
				ok = ok && len(owned) == want[c.ID()]
				for _, tok := range owned {
					mu.Lock()
					ok = ok && seen[int64(tok)]
					mu.Unlock()
				}
			}
			if ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("not settled on %v: %w", want, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	a, err := b.consumer(ctx, group, "a", h, wait, 1)
	if err != nil {
		return sample{}, err
	}
	defer stopConsumer(a)
	if err := settled(a); err != nil {
		return sample{}, err
	}
	mu.Lock()
	lat = lat[:0] // the initial claims are not handoffs
	mu.Unlock()
	for i := range b.f.handoffs {
		c, err := b.consumer(ctx, group, fmt.Sprintf("b%d", i), h, wait, 1)
		if err != nil {
			return sample{}, err
		}
		if err := settled(a, c); err != nil {
			stopConsumer(c)
			return sample{}, err
		}
		stopConsumer(c)
		if err := settled(a); err != nil {
			return sample{}, err
		}
	}
	mu.Lock()
	defer mu.Unlock()
	s := sample{ops: len(lat), lat: slices.Clone(lat)}
	slices.Sort(s.lat)
	return s, nil
}

// openKafkaBench starts or connects to PostgreSQL and Kafka, creates a
// database and a topic of the suite's own, produces the records and opens
// the pools. cleanup undoes it all.
func openKafkaBench(ctx context.Context, f kafkaFlags, stderr io.Writer) (b *kafkaBench, version, where string, cleanup func(), err error) {
	url, where, stopServer, err := database(ctx)
	if err != nil {
		return nil, "", "", nil, err
	}
	undo := []func(){stopServer}
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	fail := func(err error) (*kafkaBench, string, string, func(), error) { return nil, "", "", nil, err }
	var rb [4]byte
	rand.Read(rb[:])
	suffix := hex.EncodeToString(rb[:])
	b = &kafkaBench{f: f, topic: "leasehold-bench-" + suffix, stderr: stderr}

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	undo = append(undo, func() { admin.Close(context.Background()) })
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fail(err)
	}
	dbName := "leasehold_bench_kafka_" + suffix
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(dbName)); err != nil {
		return fail(fmt.Errorf("create the bench database (the role needs CREATEDB): %w", err))
	}
	undo = append(undo, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+quoteIdent(dbName)+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(stderr, "kafka: drop database %s: %v\n", dbName, err)
		}
	})
	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fail(err)
	}
	base.ConnConfig.Database = dbName
	base.MinConns = 0
	open := func(conns int32) (*pgxpool.Pool, error) {
		c := base.Copy()
		c.MaxConns = conns
		p, err := pgxpool.NewWithConfig(ctx, c)
		if err == nil {
			undo = append(undo, p.Close)
		}
		return p, err
	}
	if b.ctl, err = open(2); err != nil {
		return fail(err)
	}
	if b.lh, err = open(int32(f.partitions)); err != nil {
		return fail(err)
	}
	if b.raw, err = open(int32(f.partitions)); err != nil {
		return fail(err)
	}
	if err := leasehold.Migrate(ctx, b.ctl, leasehold.MigrateConfig{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}
	if _, err := b.ctl.Exec(ctx, `CREATE TABLE kafka_effects (topic text, partition int, "offset" bigint, value bytea)`); err != nil {
		return fail(err)
	}
	if b.sql, err = renderKafkaSQL(""); err != nil {
		return fail(err)
	}

	if f.brokers == "" {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(f.partitions), b.topic))
		if err != nil {
			return fail(fmt.Errorf("kfake: %w", err))
		}
		undo = append(undo, kc.Close)
		b.brokers = kc.ListenAddrs()
		where += ", kfake in process"
	} else {
		b.brokers = strings.Split(f.brokers, ",")
		if err := createTopic(ctx, b.brokers, b.topic, int32(f.partitions)); err != nil {
			return fail(err)
		}
		undo = append(undo, func() { deleteTopic(b.brokers, b.topic) })
		where += ", Kafka at " + f.brokers
	}
	fmt.Fprintf(stderr, "kafka suite: producing %d records...\n", f.records)
	if b.ends, err = produceRecords(ctx, b.brokers, b.topic, f.records); err != nil {
		return fail(err)
	}
	return b, version, where, cleanup, nil
}

// produceRecords writes n records of 100 bytes with keys spread over the
// partitions and returns each partition's log end.
func produceRecords(ctx context.Context, brokers []string, topic string, n int) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var mu sync.Mutex
	ends := map[int32]int64{}
	var first error
	val := []byte(strings.Repeat("x", 100))
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: val}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			if err == nil {
				ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, err
	}
	return ends, first
}
