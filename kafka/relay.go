package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// Relay publishes the fenced outbox (package outbox) of the partitions its
// worker owns to Kafka, exactly once: each owned partition's records, in
// commit order, through a transactional producer of the partition's own
// (transactional id "<TransactionalIDPrefix>.<group>.<partition>"), with
// the partition's progress committed in the same Kafka transaction. A
// worker runs it (worker.Config.Relay) beside its source: Open at Start,
// Run for each grant, Close at Stop.
//
// At a grant with records to publish, the relay initialises the
// partition's producer, which bumps its epoch in Kafka and so fences the
// producer of any earlier owner (Kafka's fencing token, beside the
// lease's), then reads the progress committed in Kafka and publishes what
// follows it. A relay is woken in-process by the commits that append to
// its partition's outbox (the partition's owner is its only writer): an
// idle partition costs no statement and no Kafka request.
type Relay struct {
	cfg    RelayConfig
	pool   *pgxpool.Pool
	place  string // the database's (outboxtx.Place)
	schema string
	q      store.OutboxSQL
	log    *slog.Logger
	retry  *backoff.Backoff

	mu    sync.Mutex
	s     *relaySession           // nil while closed
	parts map[int]*relayPartition // partitions relayed now
	errs  map[int]string          // partitions whose last attempt failed: why

	transactions, records, fenced, failed atomic.Int64
}

// relaySession is one Open..Close of a Relay.
type relaySession struct {
	group  string
	closed func()      // undoes outboxtx.Opened
	topic  atomic.Bool // ProgressTopic is known to exist
	opts   []kgo.Opt
	fails  *lograte.Limiter
}

// relayPartition is what Stats reports of a partition being relayed.
type relayPartition struct {
	token    fence.Token
	progress atomic.Int64 // the last segment published (0: none known yet)
	pending  atomic.Int64 // segments seen unpublished at the last read (at most a read's worth)
	oldest   atomic.Int64 // commit time (unix ns) of the oldest segment seen unpublished; 0: drained
}

// NewRelay returns a Relay publishing db's outbox, configured by cfg; a
// configuration error wraps ErrInvalidConfig.
func NewRelay(db *leasehold.DB, cfg RelayConfig) (*Relay, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Relay{cfg: cfg, pool: db.Pool(), place: outboxtx.Place(db.Pool()), schema: db.Schema(), q: st.Outbox, log: db.Logger(),
		retry: backoff.New(cfg.RetryMin, cfg.RetryMax, nil),
		parts: map[int]*relayPartition{}, errs: map[int]string{}}, nil
}

// Config returns the Relay's configuration, with defaults filled in.
func (r *Relay) Config() RelayConfig { return r.cfg }

// Open prepares the Relay to publish group's outbox; the worker calls it
// at Start. It does no I/O: Kafka being unreachable does not keep a worker
// from starting (the records wait in the outbox; the relay retries, logs
// and reports it). ProgressTopic is created, with one partition, by the
// first producer that finds it missing. It returns ErrInUse if the Relay
// is open already.
func (r *Relay) Open(_ context.Context, group string) error {
	if group == "" {
		return fmt.Errorf("%w: empty group", ErrInvalidConfig)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s != nil {
		return fmt.Errorf("relay: %w", ErrInUse)
	}
	log := r.log.With("group", group)
	fails, err := lograte.New(log, lograte.Config{})
	if err != nil {
		return err
	}
	s := &relaySession{group: group, fails: fails}
	s.opts = slices.Clip(append(append(producerDefaults(kgoLogger{log, fails}), r.cfg.ClientOptions...),
		kgo.SeedBrokers(r.cfg.Brokers...)))
	s.closed = outboxtx.Opened(r.place, r.schema, group)
	r.s = s
	return nil
}

// Close undoes Open; the worker calls it at Stop, after its partitions were
// given up. The Relay can be opened again.
func (r *Relay) Close(context.Context) error {
	r.mu.Lock()
	s := r.s
	r.s = nil
	r.mu.Unlock()
	if s != nil {
		s.closed()
		s.fails.Close()
	}
	return nil
}

func (r *Relay) session() *relaySession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.s
}

// Run publishes the outbox of group partition o.Partition until ctx is
// cancelled (handoff, lost lease, Stop). It is called by the worker for
// each grant, between Open and Close. A failed publish (Kafka or database
// error, or a newer producer of the partition) is logged and tried again
// after a backoff, with a new producer that reads the progress committed
// in Kafka again; so a failure, whatever its outcome, never publishes a
// record twice nor skips one.
func (r *Relay) Run(ctx context.Context, o partition.Ownership) {
	s := r.session()
	switch {
	case s == nil:
		r.log.Error("kafka: relay Run refused", "group", o.Group, "partition", o.Partition, "err", ErrNotOpen)
		return
	case s.group != o.Group:
		r.log.Error("kafka: relay Run refused: not a partition of the group the relay is open for",
			"run_group", o.Group, "group", s.group, "partition", o.Partition)
		return
	}
	wake, unregister := outboxtx.Register(r.place, r.schema, o.Group, o.Partition)
	defer unregister()
	st := &relayPartition{token: o.Token}
	r.mu.Lock()
	r.parts[o.Partition] = st
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.parts[o.Partition] == st {
			delete(r.parts, o.Partition)
			delete(r.errs, o.Partition)
		}
		r.mu.Unlock()
	}()
	g := &relayGrant{r: r, s: s, o: o, st: st,
		log: r.log.With("group", o.Group, "partition", o.Partition, "token", int64(o.Token))}
	defer g.closeProducer()
	attempt := 0
	for {
		err := g.drain(ctx)
		if ctx.Err() != nil {
			if errors.Is(err, fence.ErrFenced) {
				r.fenced.Add(1) // a stale relay's publish refused as its grant ends
			}
			return
		}
		if err == nil {
			if attempt > 0 {
				s.fails.Recovered("relay", "kafka: relay recovered", "partition", o.Partition)
				r.mu.Lock()
				delete(r.errs, o.Partition)
				r.mu.Unlock()
			}
			attempt = 0
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			continue
		}
		g.closeProducer() // the next attempt starts from what Kafka committed
		if errors.Is(err, fence.ErrFenced) {
			r.fenced.Add(1)
		} else {
			r.failed.Add(1)
		}
		r.mu.Lock()
		r.errs[o.Partition] = err.Error()
		r.mu.Unlock()
		s.fails.Fail("relay", "kafka: relay failed; publishing again from the progress committed in Kafka after a backoff",
			"partition", o.Partition, "token", int64(o.Token), "err", err, "attempt", attempt+1)
		d := r.retry.Delay(attempt)
		attempt++
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// RelayStats are a Relay's counters since it was created, and the
// partitions it relays now.
type RelayStats struct {
	// Transactions is how many Kafka transactions committed.
	Transactions int64
	// Records is how many records they published.
	Records int64
	// Fenced is how many publishes a newer producer of the partition
	// refused (a newer owner's relay initialised it): nothing of them was
	// published.
	Fenced int64
	// Failed is how many publishes failed otherwise (Kafka or database
	// errors, a record the brokers refused); published again after a
	// backoff.
	Failed int64
	// Partitions are the group partitions relayed now, by partition.
	Partitions map[int]RelayPartition
}

// RelayPartition is a partition a Relay relays now.
type RelayPartition struct {
	// Token is the grant's fencing token.
	Token fence.Token
	// Progress is the last outbox segment published (0 before the relay
	// read its progress from Kafka, which it does once there is something
	// to publish).
	Progress int64
	// Pending is how many committed segments the last read found
	// unpublished (at most a read's worth).
	Pending int64
	// Lag is how long the oldest of them has been committed (0 when the
	// outbox is published).
	Lag time.Duration
	// Err is why the last attempt failed ("" if it did not).
	Err string
}

// Stats returns the Relay's counters and partitions.
func (r *Relay) Stats() RelayStats {
	st := RelayStats{Transactions: r.transactions.Load(), Records: r.records.Load(),
		Fenced: r.fenced.Load(), Failed: r.failed.Load(), Partitions: map[int]RelayPartition{}}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, s := range r.parts {
		rp := RelayPartition{Token: s.token, Progress: s.progress.Load(), Pending: s.pending.Load(), Err: r.errs[p]}
		if o := s.oldest.Load(); o != 0 {
			rp.Lag = max(0, now.Sub(time.Unix(0, o)))
		}
		st.Partitions[p] = rp
	}
	return st
}
