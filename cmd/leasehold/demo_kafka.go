package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/worker"
)

const (
	kafkaDemoTopic      = "payments"
	kafkaDemoPartitions = 8
	kafkaDemoRecords    = 1000 // per wave; two waves
	kafkaDemoTTL        = 2 * time.Second
)

// runKafkaDemoCmd runs `leasehold demo --kafka`.
func runKafkaDemoCmd(cmd *cobra.Command, url string, asJSON bool, opts *rootOptions) error {
	story := cmd.OutOrStdout()
	if asJSON {
		story = cmd.ErrOrStderr()
	}
	rep, err := runKafkaDemo(cmd.Context(), demoConfig{DatabaseURL: databaseURL(url), Out: story,
		Logger: opts.logger(cmd.ErrOrStderr())})
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(cmd.OutOrStdout()).Encode(rep); err != nil {
			return err
		}
	} else {
		rep.print(cmd.OutOrStdout())
	}
	if len(rep.Violations) > 0 {
		return fmt.Errorf("demo: invariants violated: %s", strings.Join(rep.Violations, "; "))
	}
	return nil
}

// kafkaReport is the outcome of a Kafka demo run.
type kafkaReport struct {
	// Records counts the records produced to the topic.
	Records int `json:"records"`
	// Applied counts the distinct records found in the ledger.
	Applied int `json:"applied"`
	// Duplicates counts ledger rows beyond the first for a record.
	Duplicates int `json:"duplicates"`
	// Lost counts the records missing from the ledger.
	Lost int `json:"lost"`
	// OutOfOrder counts ledger rows applied before an earlier offset of
	// their partition.
	OutOfOrder int `json:"out_of_order"`
	// OffsetsAtLogEnd counts the partitions whose stored offset equals the
	// log end.
	OffsetsAtLogEnd int `json:"offsets_at_log_end"`
	// Partitions is the topic's partition count.
	Partitions int `json:"partitions"`
	// FencedRefused counts the zombie's commits that were refused.
	FencedRefused int64 `json:"fenced_refused"`
	// FailoverMS is the time from the zombie's pause to the new owner's
	// commit of the zombie's partition.
	FailoverMS int64 `json:"failover_ms"`
	// PerWorker counts the records each worker committed.
	PerWorker map[string]int64 `json:"per_worker"`
	// OK reports whether every invariant held.
	OK bool `json:"ok"`
	// Violations describe the invariants that failed.
	Violations []string `json:"violations"`
}

func (r *kafkaReport) check() {
	v := []string{}
	if r.Duplicates != 0 {
		v = append(v, fmt.Sprintf("%d records applied more than once", r.Duplicates))
	}
	if r.Lost != 0 {
		v = append(v, fmt.Sprintf("%d records lost", r.Lost))
	}
	if r.OutOfOrder != 0 {
		v = append(v, fmt.Sprintf("%d records applied out of partition order", r.OutOfOrder))
	}
	if r.OffsetsAtLogEnd != r.Partitions {
		v = append(v, fmt.Sprintf("%d of %d stored offsets at the log end", r.OffsetsAtLogEnd, r.Partitions))
	}
	if r.FencedRefused != 1 {
		v = append(v, fmt.Sprintf("%d zombie commits refused, want 1", r.FencedRefused))
	}
	r.Violations, r.OK = v, len(v) == 0
}

func (r kafkaReport) print(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Report")
	fmt.Fprintf(w, "  records produced           %d in %d partitions\n", r.Records, r.Partitions)
	fmt.Fprintf(w, "  records applied            %d\n", r.Applied)
	fmt.Fprintf(w, "  lost                       %d\n", r.Lost)
	fmt.Fprintf(w, "  duplicates                 %d\n", r.Duplicates)
	fmt.Fprintf(w, "  out of partition order     %d\n", r.OutOfOrder)
	fmt.Fprintf(w, "  stored offsets at log end  %d of %d\n", r.OffsetsAtLogEnd, r.Partitions)
	fmt.Fprintf(w, "  zombie commits refused     %d\n", r.FencedRefused)
	fmt.Fprintf(w, "  failover                   %d ms (from the pause to the new owner's commit)\n", r.FailoverMS)
	ids := make([]string, 0, len(r.PerWorker))
	for id := range r.PerWorker {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(w, "  committed by %-13s %d records\n", id, r.PerWorker[id])
	}
	if r.OK {
		fmt.Fprintln(w, "All invariants hold: every record applied exactly once, in order, the zombie refused.")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATED: %s\n", v)
	}
}

// kafkaDemo is the state of one run of the Kafka story.
// kafkaEnv is what the Kafka story's steps share.
type kafkaEnv struct {
	out   *display
	log   *slog.Logger
	pool  *pgxpool.Pool
	h     *leasehold.DB
	table string // the quoted schema
}

func (e *kafkaEnv) say(format string, args ...any)  { e.out.say(format, args...) }
func (e *kafkaEnv) line(format string, args ...any) { e.out.line(format, args...) }

type kafkaDemo struct {
	d       *kafkaEnv
	group   string
	ledger  string // quoted table
	brokers []string
	ends    map[int32]int64
	rep     kafkaReport

	armed   chan struct{} // closed: worker-1's next batch pauses
	holding chan *kafka.Batch
	release chan struct{}
	once    sync.Once
}

// runKafkaDemo runs the Kafka story and returns its report, whose
// Violations list the invariants that failed. An error means the story
// could not be told.
func runKafkaDemo(ctx context.Context, cfg demoConfig) (kafkaReport, error) {
	w := cfg.Out
	if w == nil {
		w = io.Discard
	}
	d := &kafkaEnv{out: newDisplay(w, false), log: cfg.Logger, table: pgx.Identifier{demoSchema}.Sanitize()}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	url, remove, err := demoDatabase(ctx, cfg.DatabaseURL, "", d.say)
	if err != nil {
		return kafkaReport{}, err
	}
	defer remove()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return kafkaReport{}, fmt.Errorf("database URL: %w", err)
	}
	defer pool.Close()
	d.pool = pool
	if d.h, err = leasehold.Open(pool, leasehold.Config{Schema: demoSchema, Logger: d.log}); err != nil {
		return kafkaReport{}, err
	}
	if err := d.h.Migrate(ctx); err != nil {
		return kafkaReport{}, err
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaDemoPartitions, kafkaDemoTopic))
	if err != nil {
		return kafkaReport{}, fmt.Errorf("kfake: %w", err)
	}
	defer kc.Close()
	var rb [4]byte
	rand.Read(rb[:])
	k := &kafkaDemo{d: d, group: "demo-kafka-" + hex.EncodeToString(rb[:]), brokers: kc.ListenAddrs(),
		ledger: d.table + ".demo_kafka_ledger", ends: map[int32]int64{},
		armed: make(chan struct{}), holding: make(chan *kafka.Batch, 1), release: make(chan struct{})}
	k.rep.Partitions = kafkaDemoPartitions
	d.say("Kafka (kfake, in process) is up on %s with topic %q of %d partitions.", k.brokers[0], kafkaDemoTopic, kafkaDemoPartitions)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+k.ledger+` (seq bigserial PRIMARY KEY, partition int NOT NULL,
		"offset" bigint NOT NULL, token bigint NOT NULL, worker text NOT NULL)`); err != nil {
		return kafkaReport{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		pool.Exec(cctx, `DROP TABLE IF EXISTS `+k.ledger)
		pool.Exec(cctx, `DELETE FROM `+d.table+`.kafka_offsets WHERE group_name = $1`, k.group)
	}()
	if err := k.story(ctx); err != nil {
		return kafkaReport{}, err
	}
	if err := k.tally(ctx); err != nil {
		return kafkaReport{}, err
	}
	k.rep.check()
	return k.rep, nil
}

// handler writes one ledger row per record; worker-1's pauses once armed.
func (k *kafkaDemo) handler(worker string) kafka.Handler {
	return func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
		offs := make([]int64, len(b.Records))
		for i, r := range b.Records {
			offs[i] = r.Offset
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+k.ledger+` (partition, "offset", token, worker)
			SELECT $1, o, $2, $3 FROM unnest($4::bigint[]) WITH ORDINALITY AS u(o, i) ORDER BY i`,
			b.Partition, int64(b.Token), worker, offs); err != nil {
			return err
		}
		if worker != "worker-1" {
			return nil
		}
		select {
		case <-k.armed:
		default:
			return nil
		}
		paused := false
		k.once.Do(func() { paused = true })
		if paused {
			k.holding <- b
			<-k.release // the pause: the transaction stays open, ctx is not looked at
		}
		return nil
	}
}

func (k *kafkaDemo) story(ctx context.Context) error {
	d := k.d
	clk := newPausableClock()
	defer clk.close()
	workers := map[string]*kafka.Consumer{}
	running := map[string]*worker.Worker{}
	var order []string
	defer func() {
		for _, id := range order {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			running[id].Stop(sctx)
			cancel()
		}
	}()
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("worker-%d", i)
		clock := lease.Clock(lease.SystemClock{})
		if i == 1 {
			clock = clk.Clock
		}
		c, err := kafka.New(d.h, kafka.Config{
			Topics: []string{kafkaDemoTopic}, Brokers: k.brokers,
			PartitionsPerTopic: kafkaDemoPartitions, Handler: k.handler(id), MaxBatch: 100,
			Fence: lease.FenceConfig{IdleTimeout: 10 * kafkaDemoTTL},
		})
		if err != nil {
			return err
		}
		w, err := worker.New(d.h, worker.Config{Group: k.group, ID: id, Kafka: c,
			Lease: lease.Config{TTL: kafkaDemoTTL, Clock: clock}})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		workers[id], running[id] = c, w
		order = append(order, id)
	}
	d.say("Three workers consume the topic: each Kafka partition is a leasehold partition, owned through a")
	d.line("         lease; the owner consumes it by direct assignment from the offset stored in PostgreSQL.")
	d.say("Each batch's ledger rows, the offset advance and the lease check commit in one transaction.")
	if err := k.produce(ctx, 0); err != nil {
		return err
	}
	if err := k.caughtUp(ctx, 20*time.Second); err != nil {
		return err
	}
	for settled := time.Now().Add(10 * time.Second); time.Now().Before(settled); {
		n := 0
		for _, c := range workers {
			n += len(c.Stats().Owned)
		}
		if n == kafkaDemoPartitions {
			break
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	for _, id := range order {
		d.say("%s owns %s", id, ownedList(workers[id]))
	}
	d.say("%d records applied; stored offsets are at the log end.", kafkaDemoRecords)

	// The zombie: worker-1 pauses inside a batch.
	close(k.armed)
	if err := k.produce(ctx, kafkaDemoRecords); err != nil {
		return err
	}
	var held *kafka.Batch
	select {
	case held = <-k.holding:
	case <-time.After(20 * time.Second):
		return fmt.Errorf("demo: worker-1 handled no batch")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	clk.pause()
	paused := time.Now()
	d.say("worker-1 PAUSES in the middle of partition %d's batch (offsets %d..%d, token %d): its ledger rows",
		held.Partition, held.Records[0].Offset, held.Records[len(held.Records)-1].Offset, held.Token)
	d.line("         are written, its transaction is open, its clock has stopped (GC pause, SIGSTOP, VM freeze).")
	// A new owner takes the partition after the TTL and commits it.
	var newToken fence.Token
	for {
		offs, err := kafka.Offsets(ctx, d.h, k.group)
		if err != nil {
			return err
		}
		for _, o := range offs {
			if o.Partition == held.Partition && o.Token > held.Token && o.Next > held.Records[0].Offset {
				newToken = o.Token
			}
		}
		if newToken != 0 {
			break
		}
		if time.Since(paused) > 10*kafkaDemoTTL {
			return fmt.Errorf("demo: nobody took partition %d over", held.Partition)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	k.rep.FailoverMS = time.Since(paused).Milliseconds()
	d.say("worker-1's lease expired in the database; partition %d's new owner (token %d) committed the",
		held.Partition, newToken)
	d.line("         same records from the stored offset %s after the pause.", secs(time.Since(paused)))

	// worker-1 resumes, still believing it holds the partition, and commits.
	before := workers["worker-1"].Stats().Fenced
	close(k.release)
	for workers["worker-1"].Stats().Fenced == before {
		if time.Since(paused) > 20*kafkaDemoTTL {
			return fmt.Errorf("demo: worker-1's commit was neither made nor refused")
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	k.rep.FencedRefused = workers["worker-1"].Stats().Fenced - before
	d.say("worker-1 RESUMES and commits its batch with token %d: REFUSED by the fence (the lease", held.Token)
	d.line("         now carries token %d); its transaction rolls back, ledger rows and offset advance alike.", newToken)
	clk.resume()
	if err := k.caughtUp(ctx, 30*time.Second); err != nil {
		return err
	}
	d.say("worker-1 learns it lost its leases, rejoins, and the group rebalances.")
	k.rep.PerWorker = map[string]int64{}
	for _, id := range order {
		k.rep.PerWorker[id] = workers[id].Stats().Records
	}
	return nil
}

func ownedList(c *kafka.Consumer) string {
	var ps []string
	for tp := range c.Stats().Owned {
		ps = append(ps, tp)
	}
	slices.Sort(ps)
	if len(ps) == 0 {
		return "nothing"
	}
	return strings.Join(ps, ", ")
}

// produce writes a wave of records with keys spread over the partitions.
func (k *kafkaDemo) produce(ctx context.Context, from int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.DefaultProduceTopic(kafkaDemoTopic))
	if err != nil {
		return err
	}
	defer cl.Close()
	var mu sync.Mutex
	var first error
	for i := from; i < from+kafkaDemoRecords; i++ {
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "account-%d", i%97), Value: fmt.Appendf(nil, "payment %d", i)},
			func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					k.ends[r.Partition] = max(k.ends[r.Partition], r.Offset+1)
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	k.rep.Records += kafkaDemoRecords
	return first
}

// caughtUp waits until every stored offset equals the log end.
func (k *kafkaDemo) caughtUp(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		offs, err := kafka.Offsets(ctx, k.d.h, k.group)
		if err != nil {
			return err
		}
		at := 0
		for _, o := range offs {
			if o.Next == k.ends[o.Partition] {
				at++
			}
		}
		if at == len(k.ends) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: stored offsets not at the log end after %v (%d of %d)", within, at, len(k.ends))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// tally checks the ledger against the log.
func (k *kafkaDemo) tally(ctx context.Context) error {
	seen := map[[2]int64]int{}
	last := map[int64]int64{}
	rows, err := k.d.pool.Query(ctx, `SELECT partition, "offset" FROM `+k.ledger+` ORDER BY seq`)
	if err != nil {
		return err
	}
	var p, o int64
	_, err = pgx.ForEachRow(rows, []any{&p, &o}, func() error {
		key := [2]int64{p, o}
		seen[key]++
		if seen[key] > 1 {
			k.rep.Duplicates++
		}
		if l, ok := last[p]; ok && o <= l {
			k.rep.OutOfOrder++
		}
		last[p] = o
		return nil
	})
	if err != nil {
		return err
	}
	// Records are produced without transactions: each partition's offsets
	// run from 0 to its log end.
	for part, end := range k.ends {
		for off := int64(0); off < end; off++ {
			if seen[[2]int64{int64(part), off}] > 0 {
				k.rep.Applied++
			} else {
				k.rep.Lost++
			}
		}
	}
	offs, err := kafka.Offsets(ctx, k.d.h, k.group)
	if err != nil {
		return err
	}
	for _, o := range offs {
		if o.Next == k.ends[o.Partition] {
			k.rep.OffsetsAtLogEnd++
		}
	}
	return nil
}
