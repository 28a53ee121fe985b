package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/kafka"
)

// kafkaWorkload is the Kafka workload: the orchestrator runs an in-process
// Kafka (kfake, on loopback) with one topic of Env.Partitions partitions and
// produces records to it; the workers consume it with kafka (one
// leasehold partition per Kafka partition), and the handler appends one
// ledger row per record in the batch's transaction, which commits with the
// offset advance and the fence check. The cluster lives in the orchestrator,
// so it survives the workers' kills.
type kafkaWorkload struct {
	cluster *kfake.Cluster
	client  *kgo.Client // the orchestrator's producer and admin client
	// opts are more options of the cluster (kafka-out taps its
	// connections).
	opts []kfake.Opt
}

// kafkaTopic is the workload's topic.
const kafkaTopic = "chaos"

// maxOffset bounds the offsets recordID can encode.
const maxOffset = 1_000_000_000

// recordID is a record's id for the checker: partition × 10⁹ + offset (so
// the id reads as both, and a partition's ids increase with its offsets).
func recordID(p int32, offset int64) int64 { return int64(p)*maxOffset + offset }

// partitionKey is a partition's key for the checker.
func partitionKey(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

func (*kafkaWorkload) Name() string { return "kafka" }

func (w *kafkaWorkload) Setup(ctx context.Context, db *pgxpool.Pool, env *Env) error {
	q, err := render(env.Schema)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, q.kafkaLedger); err != nil {
		return fmt.Errorf("chaos: ledger: %w", err)
	}
	if _, err := db.Exec(ctx, q.group, env.Group, env.Partitions); err != nil {
		return fmt.Errorf("chaos: group: %w", err)
	}
	opts := append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(int32(env.Partitions), kafkaTopic)}, w.opts...)
	if w.cluster, err = kfake.NewCluster(opts...); err != nil {
		return fmt.Errorf("chaos: kfake: %w", err)
	}
	env.Brokers = w.cluster.ListenAddrs()
	w.client, err = kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.DefaultProduceTopic(kafkaTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("chaos: Kafka client: %w", err)
	}
	return nil
}

func (w *kafkaWorkload) Close() error {
	if w.client != nil {
		w.client.Close()
	}
	if w.cluster != nil {
		w.cluster.Close()
	}
	return nil
}

// Feed produces n records, round robin over the partitions, evenly over d.
// A record whose production failed is produced again (as a new record: if
// the first did land, both are in the log, and the checker reads the log).
func (w *kafkaWorkload) Feed(ctx context.Context, _ *pgxpool.Pool, env Env, n int, d time.Duration) ([]int64, error) {
	ticks := max(1, int(d/feedTick))
	var ids []int64
	start := time.Now()
	for t, sent := 0, 0; sent < n; t++ {
		want := min(n, (t+1)*n/ticks+1)
		var batch []*kgo.Record
		for ; sent < want; sent++ {
			batch = append(batch, &kgo.Record{Partition: int32(sent % env.Partitions), Value: fmt.Appendf(nil, `{"seq":%d}`, sent)})
		}
		for len(batch) > 0 {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res := w.client.ProduceSync(pctx, batch...)
			cancel()
			var again []*kgo.Record
			for _, r := range res {
				if r.Err != nil {
					again = append(again, &kgo.Record{Partition: r.Record.Partition, Value: r.Record.Value})
					continue
				}
				ids = append(ids, recordID(r.Record.Partition, r.Record.Offset))
			}
			if batch = again; len(batch) == 0 {
				break
			}
			if !sleepFor(ctx, 200*time.Millisecond) {
				return ids, ctx.Err()
			}
		}
		if !sleepUntil(ctx, start.Add(time.Duration(t+1)*feedTick)) {
			return ids, ctx.Err()
		}
	}
	return ids, nil
}

// Outstanding returns the records between the stored offsets and the log
// ends.
func (w *kafkaWorkload) Outstanding(ctx context.Context, db *pgxpool.Pool, env Env) (int, error) {
	ends, err := w.logEnds(ctx, env.Partitions)
	if err != nil {
		return 0, err
	}
	stored, err := storedOffsets(ctx, db, env)
	if err != nil {
		return 0, err
	}
	n := int64(0)
	for p, end := range ends {
		n += max(0, end-stored[p])
	}
	return int(n), nil
}

// Items returns the records in the topic's log.
func (w *kafkaWorkload) Items(ctx context.Context, _ *pgxpool.Pool, env Env) (int, error) {
	ends, err := w.logEnds(ctx, env.Partitions)
	if err != nil {
		return 0, err
	}
	n := int64(0)
	for _, end := range ends {
		n += end
	}
	return int(n), nil
}

func (w *kafkaWorkload) Applied(ctx context.Context, db *pgxpool.Pool, env Env) (int64, error) {
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.QueryRow(ctx, q.kafkaApplied).Scan(&n)
	return n, err
}

// Collect reads the topic's whole log (the records produced, the truth the
// ledger is checked against), the ledger and the stored offsets.
func (w *kafkaWorkload) Collect(ctx context.Context, db *pgxpool.Pool, env Env) (Input, error) {
	q, err := render(env.Schema)
	if err != nil {
		return Input{}, err
	}
	ends, err := w.logEnds(ctx, env.Partitions)
	if err != nil {
		return Input{}, err
	}
	log, err := w.readLog(ctx, env, ends)
	if err != nil {
		return Input{}, err
	}
	rows, err := db.Query(ctx, q.kafkaEntries)
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read ledger: %w", err)
	}
	ledger, err := pgx.CollectRows(rows, pgx.RowToStructByPos[kafkaEntry])
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read ledger: %w", err)
	}
	stored, err := storedOffsets(ctx, db, env)
	if err != nil {
		return Input{}, err
	}
	return kafkaInput(kafkaTopic, log, ledger, stored, ends), nil
}

// kafkaRecord is a record of the topic's log.
type kafkaRecord struct {
	Partition int32
	Offset    int64
}

// kafkaEntry is a row of the Kafka workload's ledger.
type kafkaEntry struct {
	N         int64
	Topic     string
	Partition int32
	Offset    int64
	Token     int64
	Worker    string
}

// kafkaInput maps the Kafka workload's record onto the checker's Input:
// each record of the log is a Job (id recordID, key its partition, state
// completed when its offset is below the partition's stored offset, pending
// otherwise), each ledger row an Entry, and each partition's stored offset
// and log end a StoredOffset. The checker's per-key order is then the
// per-partition offset order.
func kafkaInput(topic string, log []kafkaRecord, ledger []kafkaEntry, stored map[int32]int64, ends map[int32]int64) Input {
	var in Input
	for _, r := range log {
		st := "pending"
		if s, ok := stored[r.Partition]; ok && r.Offset < s {
			st = "completed"
		}
		in.Jobs = append(in.Jobs, Job{ID: recordID(r.Partition, r.Offset), Key: partitionKey(topic, r.Partition),
			Partition: int(r.Partition), State: st})
	}
	for _, e := range ledger {
		id := recordID(e.Partition, e.Offset)
		if e.Topic != topic || e.Offset < 0 || e.Offset >= maxOffset {
			id = -1 - e.N // not a record of the run's topic: foreign
		}
		in.Ledger = append(in.Ledger, Entry{N: e.N, Job: id, Key: partitionKey(e.Topic, e.Partition),
			Partition: int(e.Partition), Token: e.Token, Worker: e.Worker})
	}
	for p := range int32(len(ends)) {
		s, ok := stored[p]
		in.Offsets = append(in.Offsets, StoredOffset{Key: partitionKey(topic, p), Stored: s, HasStored: ok, End: ends[p]})
	}
	return in
}

// storedOffsets returns the group's stored offsets by partition.
func storedOffsets(ctx context.Context, db *pgxpool.Pool, env Env) (map[int32]int64, error) {
	h, err := handle(db, env.Schema, nil)
	if err != nil {
		return nil, err
	}
	offs, err := kafka.Offsets(ctx, h, env.Group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, o := range offs {
		if o.Topic == kafkaTopic {
			out[o.Partition] = o.Next
		}
	}
	return out, nil
}

// logEnds lists the log end offset of each of the topic's n partitions.
func (w *kafkaWorkload) logEnds(ctx context.Context, n int) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = kafkaTopic
	for p := range int32(n) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = -1 // the log end
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(lctx, w.client)
	if err != nil {
		return nil, fmt.Errorf("chaos: list the log ends: %w", err)
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("chaos: log end of %s/%d: %w", t.Topic, rp.Partition, err)
			}
			ends[rp.Partition] = rp.Offset
		}
	}
	if len(ends) != n {
		return nil, fmt.Errorf("chaos: listed %d log ends of %d partitions", len(ends), n)
	}
	return ends, nil
}

// readLog reads every record of the topic up to ends.
func (w *kafkaWorkload) readLog(ctx context.Context, env Env, ends map[int32]int64) ([]kafkaRecord, error) {
	from := map[int32]kgo.Offset{}
	left := 0
	for p, end := range ends {
		if end > 0 {
			from[p] = kgo.NewOffset().AtStart()
			left++
		}
	}
	if left == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kafkaTopic: from}))
	if err != nil {
		return nil, fmt.Errorf("chaos: Kafka client: %w", err)
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var out []kafkaRecord
	done := map[int32]bool{}
	for left > 0 {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, fmt.Errorf("chaos: read the topic's log: %d partitions not read to their end: %w", left, rctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return nil, fmt.Errorf("chaos: read the topic's log: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			out = append(out, kafkaRecord{Partition: r.Partition, Offset: r.Offset})
			if r.Offset == ends[r.Partition]-1 && !done[r.Partition] {
				done[r.Partition] = true
				left--
			}
		})
	}
	return out, nil
}
