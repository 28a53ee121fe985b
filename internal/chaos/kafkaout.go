package chaos

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/outbox"
)

// kafkaOutWorkload is the kafka-out workload, exactly once into Kafka: the
// Kafka workload's input topic and ledger, plus, per input record, one
// output record appended with outbox.Add in the batch's fenced transaction
// (key: the input's partition key; value: the input's record id), which
// each worker's kafka.Relay publishes to the output topic, through a
// transactional producer per partition. The orchestrator reads the output
// topic back at the end, read_committed (and counts what a
// read_uncommitted reader sees). Under Unfenced (the control), the
// handler is the same but the workers publish the outbox with
// controlRelay, an idempotent, non-transactional relay that deletes what
// it sent afterwards: the output must show duplicates.
type kafkaOutWorkload struct {
	kafkaWorkload
	tap kafkaTap // counts the stale relays' requests Kafka refused
}

// kafkaOutTopic is the kafka-out workload's output topic.
const kafkaOutTopic = "chaos-out"

// relayRetryMin and relayRetryMax bound the kafka-out relays' backoff
// after a failed publish: short, so that a run's faults cost little.
const (
	relayRetryMin = 50 * time.Millisecond
	relayRetryMax = time.Second
)

func (*kafkaOutWorkload) Name() string { return "kafka-out" }

// Setup sets the Kafka workload up and creates the output topic, with as
// many partitions as the input topic.
func (w *kafkaOutWorkload) Setup(ctx context.Context, db *pgxpool.Pool, env *Env) error {
	w.opts = append(w.opts, kfake.ListenFn(w.tap.listen))
	if err := w.kafkaWorkload.Setup(ctx, db, env); err != nil {
		return err
	}
	if err := w.cluster.CreateTopic(kafkaOutTopic, int32(env.Partitions), nil); err != nil {
		return fmt.Errorf("chaos: create the output topic: %w", err)
	}
	return nil
}

// Outstanding returns the input records not consumed yet, plus the outbox
// segments not published (and deleted) yet.
func (w *kafkaOutWorkload) Outstanding(ctx context.Context, db *pgxpool.Pool, env Env) (int, error) {
	n, err := w.kafkaWorkload.Outstanding(ctx, db, env)
	if err != nil {
		return 0, err
	}
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var segs int
	if err := db.QueryRow(ctx, q.outboxPending, env.Group).Scan(&segs); err != nil {
		return 0, fmt.Errorf("chaos: read the outbox: %w", err)
	}
	return n + segs, nil
}

// Collect reads what the Kafka workload's Collect does, and the output
// topic.
func (w *kafkaOutWorkload) Collect(ctx context.Context, db *pgxpool.Pool, env Env) (Input, error) {
	in, err := w.kafkaWorkload.Collect(ctx, db, env)
	if err != nil {
		return Input{}, err
	}
	committed, uncommitted, err := w.readOutput(ctx, env)
	if err != nil {
		return Input{}, err
	}
	in.Output = &OutputRun{Uncommitted: len(uncommitted)}
	in.Output.Refused, in.Output.RefusedRequests, in.Output.RefusedBy = w.tap.refusals()
	for _, r := range committed {
		in.Output.Records = append(in.Output.Records, outputRecord(r))
	}
	return in, nil
}

// outputRecord reads an output record: its value is the input's record id.
func outputRecord(r *kgo.Record) OutputRecord {
	id, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil || id < 0 {
		id = -1
	}
	return OutputRecord{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Input: id}
}

// outputEnd is the key and value of the sentinel records that mark the
// end of each output partition, once every publish is over.
const outputEnd = "chaos-end"

// outputWithin bounds the read of the output topic.
const outputWithin = 60 * time.Second

// readOutput reads the output topic twice, read_committed and
// read_uncommitted, at once. It is called once the outbox is empty and
// the workers have stopped: it first appends a sentinel record
// (outputEnd) to each partition, and a reader has read the whole topic
// once it has seen every sentinel. A read_committed reader sees a
// sentinel only once every transaction before it has ended; if one never
// did, its records are reported missing (the read gives up after
// outputWithin).
func (w *kafkaOutWorkload) readOutput(ctx context.Context, env Env) (committed, uncommitted []*kgo.Record, err error) {
	var ends []*kgo.Record
	for p := range int32(env.Partitions) {
		ends = append(ends, &kgo.Record{Topic: kafkaOutTopic, Partition: p, Key: []byte(outputEnd), Value: []byte(outputEnd)})
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = w.client.ProduceSync(pctx, ends...).FirstErr()
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: mark the end of the output topic: %w", err)
	}
	var (
		cerr, uerr error
		wg         sync.WaitGroup
	)
	wg.Go(func() { committed, cerr = readTopic(ctx, env, kgo.ReadCommitted()) })
	wg.Go(func() { uncommitted, uerr = readTopic(ctx, env, kgo.ReadUncommitted()) })
	wg.Wait()
	return committed, uncommitted, errors.Join(cerr, uerr)
}

// readTopic reads the output topic, with the isolation level iso, from
// the start until it has seen the sentinel of every partition, or for
// outputWithin; it returns the records but the sentinels.
func readTopic(ctx context.Context, env Env, iso kgo.IsolationLevel) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.Brokers...), kgo.ConsumeTopics(kafkaOutTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("chaos: Kafka client: %w", err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ended := map[int32]bool{}
	rctx, cancel := context.WithTimeout(ctx, outputWithin)
	defer cancel()
	for len(ended) < env.Partitions && rctx.Err() == nil {
		fs := cl.PollFetches(rctx)
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, err)
			}
		})
		if ferr != nil {
			return nil, fmt.Errorf("chaos: read the output topic: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == outputEnd {
				ended[r.Partition] = true
				return
			}
			out = append(out, r)
		})
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// Work runs the Kafka workload's worker whose handler also appends one
// output record per input record to the outbox, in the batch's fenced
// transaction, and a kafka.Relay publishing the outbox (the control: an
// unsafe relay, controlRelay). A relay's Kafka commit may be followed by
// the process killing itself (WorkerEnv.RelayKill).
func (w *kafkaOutWorkload) Work(ctx context.Context, db *pgxpool.Pool, we WorkerEnv) error {
	q, err := render(we.Schema)
	if err != nil {
		return err
	}
	handler := func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
		if ok, d := we.Stall(); ok {
			time.Sleep(d) // ignoring the context: a stuck call, a GC pause
		}
		// The statements must reach the fence check even once ctx ends;
		// WithoutCancel keeps the outbox scope ctx carries.
		ectx := context.WithoutCancel(ctx)
		offs := make([]int64, len(b.Records))
		recs := make([]outbox.Record, len(b.Records))
		key := []byte(partitionKey(b.Topic, b.Partition))
		for i, r := range b.Records {
			offs[i] = r.Offset
			recs[i] = outbox.Record{Topic: kafkaOutTopic, Key: key,
				Value: strconv.AppendInt(nil, recordID(b.Partition, r.Offset), 10)}
		}
		if _, err := tx.Exec(ectx, q.kafkaApply, b.Topic, b.Partition, int64(b.Token), we.ID, offs); err != nil {
			return err
		}
		if err := outbox.Add(ectx, tx, recs...); err != nil {
			return err
		}
		hold(we, HandlerRun{Partition: int(b.Partition), Token: int64(b.Token), First: offs[0], Last: offs[len(offs)-1]})
		return nil
	}
	run := kafkaRun{handler: handler}
	if we.Unfenced {
		cr, err := newControlRelay(db, we)
		if err != nil {
			return err
		}
		defer cr.close()
		run.beside = cr.run
		return runKafka(ctx, db, we, run)
	}
	h, err := workerHandle(db, we)
	if err != nil {
		return err
	}
	var opts []kgo.Opt
	if we.RelayPause != nil {
		rp := &relayPauser{we: we}
		opts = append(opts, kgo.WithHooks(rp), kgo.Dialer(rp.dial))
	}
	run.relay, err = kafka.NewRelay(h, kafka.RelayConfig{
		Brokers: we.Brokers, RetryMin: relayRetryMin, RetryMax: relayRetryMax, ClientOptions: opts,
		OnPublish: func(p kafka.Publish) {
			we.Recorder.Record(Event{Type: EventRelay, Outcome: RelayPublished, Partition: p.Partition, Token: int64(p.Token)})
			maybeKillSelf(we, p.Partition, int64(p.Token), p.Records)
		},
	})
	if err != nil {
		return err
	}
	return runKafka(ctx, db, we, run)
}

// maybeKillSelf kills this process (SIGKILL) if we.RelayKill says so for
// one of the records just published: a relay killed right after its Kafka
// commit, before anything after it (deleting what it published from the
// outbox). It records the kill first; the history file is written
// through, so the line survives.
func maybeKillSelf(we WorkerEnv, partition int, token int64, records int) {
	if we.RelayKill == nil {
		return
	}
	kill := false
	for range max(records, 1) {
		kill = we.RelayKill() || kill
	}
	if !kill {
		return
	}
	we.Recorder.Record(Event{Type: EventRelayKill, Partition: partition, Token: token})
	we.Logger.Warn("chaos: killing this worker right after a relay's Kafka commit", "partition", partition, "token", token)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// relayPauser stops the whole worker process (SIGSTOP) at a relay's
// commit, having asked the orchestrator, through the pause file, to
// resume it 2 to 3 TTLs later (WorkerEnv.RelayPause): a relay paused
// past its lease just before its commit reaches Kafka. Each record
// produced draws a pause (a franz-go hook on the relays' producers); a
// pause drawn for a partition happens when that partition's producer next
// writes its EndTxn(commit) request, just before the write (the relays'
// connections are wrapped, kgo.Dialer). By the time it resumes, the
// partition's next owner has initialised its own producer of the
// partition's transactional id, which aborted the transaction and fenced
// this producer: Kafka refuses the stale relay's commit (the relay sends
// it whether or not its grant ended meanwhile).
type relayPauser struct {
	we    WorkerEnv
	mu    sync.Mutex
	armed map[int]time.Duration // partitions whose next commit pauses, for how long
}

// OnProduceRecordUnbuffered is called with each record produced, just
// before its promise: it draws a pause for the record's partition.
func (h *relayPauser) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil || r.Topic != kafkaOutTopic {
		return
	}
	ok, d := h.we.RelayPause()
	if !ok {
		return
	}
	i := bytes.LastIndexByte(r.Key, '/')
	if i < 0 {
		return
	}
	p, err := strconv.Atoi(string(r.Key[i+1:]))
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed == nil {
		h.armed = map[int]time.Duration{}
	}
	h.armed[p] = d
}

// dial is the relays' kgo.Dialer: their connections pass every write by
// beforeWrite.
func (h *relayPauser) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &pausingConn{Conn: c, h: h}, nil
}

// pausingConn is a relay's connection to Kafka.
type pausingConn struct {
	net.Conn
	h *relayPauser
}

func (c *pausingConn) Write(b []byte) (int, error) {
	c.h.beforeWrite(b)
	return c.Conn.Write(b)
}

// beforeWrite stops the process if b is the EndTxn(commit) request of a
// partition whose pause was drawn. franz-go writes each request whole.
func (h *relayPauser) beforeWrite(b []byte) {
	if len(b) < 8 || int16(binary.BigEndian.Uint16(b[4:])) != kmsg.EndTxn.Int16() {
		return
	}
	r := kbin.Reader{Src: b[4:]}
	_, version, _ := r.Int16(), r.Int16(), r.Int32()
	r.NullableString()
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() || req.ReadFrom(r.Src) != nil || !req.Commit {
		return
	}
	i := strings.LastIndexByte(req.TransactionalID, '.')
	p, err := strconv.Atoi(req.TransactionalID[i+1:])
	if i < 0 || err != nil {
		return
	}
	h.mu.Lock()
	d, ok := h.armed[p]
	delete(h.armed, p)
	h.mu.Unlock()
	if !ok {
		return
	}
	tmp := h.we.PauseFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(d.Milliseconds(), 10)), 0o644); err != nil {
		h.we.Logger.Warn("chaos: relay pause: write the pause file", "err", err)
		return
	}
	if err := os.Rename(tmp, h.we.PauseFile); err != nil {
		h.we.Logger.Warn("chaos: relay pause: write the pause file", "err", err)
		return
	}
	h.we.Recorder.Record(Event{Type: EventRelayPause, Partition: p})
	h.we.Logger.Warn("chaos: stopping this worker just before a relay's Kafka commit", "partition", p,
		"transactional_id", req.TransactionalID, "for", d)
	stopSelf()
}

// stopSelf stops this process (SIGSTOP) and returns once it was resumed
// (SIGCONT). A signal to the own process stops the other threads a moment
// later than the kill returns: the sleep keeps the caller from going on
// before.
func stopSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	time.Sleep(100 * time.Millisecond)
}
