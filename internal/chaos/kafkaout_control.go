package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/worker"
)

// controlRelay is the kafka-out workload's CONTROL (Config.Unfenced), never
// a user option: the relay an outbox gets without Kafka transactions. It
// publishes the outbox of the partitions its worker owns (worker.Owned,
// polled) with one idempotent but non-transactional producer, and records
// its progress in PostgreSQL only after the send, by deleting what it
// sent (no fence: nothing in Kafka refuses a stale producer's records, and
// nothing ties the deletion to the send). It reads and deletes with the
// outbox's own statements, kafka.Relay's (store.OutboxSQL): only the order
// and the producer differ. A relay killed, paused or cut off between the
// send and the deletion leaves records that the partition's next owner
// sends again, and the checker must find them published twice.
type controlRelay struct {
	db *pgxpool.Pool
	we WorkerEnv
	q  store.OutboxSQL
	cl *kgo.Client
}

// Its timing: how often it polls for owned partitions and their outboxes,
// how many rows one read takes at most, and the gap between a send's
// acknowledgement and the deletion (a round trip or two; a stall, with
// the run's stall probability, makes it 1.5 to 2.5 TTLs).
const (
	controlPoll  = 50 * time.Millisecond
	controlRows  = 1000
	controlGap   = 20 * time.Millisecond
	controlChunk = 1000 // segments per delete statement
)

func newControlRelay(db *pgxpool.Pool, we WorkerEnv) (*controlRelay, error) {
	st, err := store.For(we.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	// franz-go producers are idempotent by default: a send retried inside
	// the client is written once; a send made again by another process is
	// a new one.
	cl, err := kgo.NewClient(kgo.SeedBrokers(we.Brokers...), kgo.ProducerLinger(0))
	if err != nil {
		return nil, fmt.Errorf("chaos: control relay: %w", err)
	}
	return &controlRelay{db: db, we: we, q: st.Outbox, cl: cl}, nil
}

func (c *controlRelay) close() { c.cl.Close() }

// run relays the partitions wk owns, one goroutine each, until ctx ends.
func (c *controlRelay) run(ctx context.Context, wk *worker.Worker) {
	running := map[int]context.CancelFunc{}
	var wg sync.WaitGroup
	defer func() {
		for _, cancel := range running {
			cancel()
		}
		wg.Wait()
	}()
	for {
		owned := wk.Owned()
		for p, cancel := range running {
			if _, ok := owned[p]; !ok {
				cancel()
				delete(running, p)
			}
		}
		for p := range owned {
			if _, ok := running[p]; !ok {
				pctx, cancel := context.WithCancel(ctx)
				running[p] = cancel
				wg.Go(func() { c.relay(pctx, p) })
			}
		}
		if !sleepFor(ctx, controlPoll) {
			return
		}
	}
}

// relay publishes partition p's outbox until ctx ends.
func (c *controlRelay) relay(ctx context.Context, p int) {
	for ctx.Err() == nil {
		sent, err := c.publish(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				c.we.Recorder.Record(Event{Type: EventRelay, Outcome: RelayFailed, Partition: p})
				c.we.Logger.Warn("chaos: control relay: publish failed", "partition", p, "err", err)
			}
			sleepFor(ctx, 200*time.Millisecond)
			continue
		}
		if !sent {
			sleepFor(ctx, controlPoll)
		}
	}
}

// publish sends the records of partition p's first segments, then deletes
// the segments: the unsafe order. It reports whether it sent anything.
func (c *controlRelay) publish(ctx context.Context, p int) (bool, error) {
	// Every segment left is unpublished: the control deletes what it sent.
	rows, err := c.db.Query(ctx, c.q.Read, c.we.Group, p, 0, controlRows)
	if err != nil {
		return false, err
	}
	type row struct {
		seq int64
		rec *kgo.Record
	}
	var read []row
	for rows.Next() {
		var (
			id, refused, topic  *string
			lo, seq, scope, age *int64
			key, value, header  []byte
		)
		// The head check columns (id, refused, lo) are kafka.Relay's; the
		// control ignores them.
		if err := rows.Scan(&id, &refused, &lo, &seq, &scope, &age, &topic, &key, &value, &header); err != nil {
			rows.Close()
			return false, err
		}
		if seq == nil {
			continue // no segment: the statement's one row of head columns
		}
		r := row{seq: *seq}
		if topic != nil {
			r.rec = &kgo.Record{Topic: *topic, Key: key, Value: value}
		}
		read = append(read, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(read) == 0 {
		return false, nil
	}
	if len(read) == controlRows && read[0].seq != read[len(read)-1].seq {
		// The last segment may be cut by the limit: the next send.
		last := read[len(read)-1].seq
		for read[len(read)-1].seq == last {
			read = read[:len(read)-1]
		}
	}
	var recs []*kgo.Record
	for _, r := range read {
		if r.rec != nil {
			recs = append(recs, r.rec)
		}
	}
	last := read[len(read)-1].seq
	if len(recs) > 0 {
		if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return false, err
		}
	}
	c.we.Recorder.Record(Event{Type: EventRelay, Outcome: RelayPublished, Partition: p})
	maybeKillSelf(c.we, p, 0, len(recs))
	gap := controlGap
	if ok, d := c.we.Stall(); ok {
		gap = d
	}
	time.Sleep(gap) // ignoring ctx: the relay finishes its step
	// Progress, recorded after the send, whatever happened meanwhile.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for {
		var n int
		if err := c.db.QueryRow(dctx, c.q.Delete, c.we.Group, p, last, controlChunk).Scan(&n); err != nil {
			return true, err
		}
		if n < controlChunk {
			return true, nil
		}
	}
}
