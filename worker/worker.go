package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

// ErrStopped is returned by Start on a stopped Worker (one that was
// stopped, or whose Start failed), and by Ready once Stop has begun. It
// wraps leasehold.ErrStopped.
var ErrStopped = lifecycle.Stopped("worker: stopped")

// ErrStarted is returned by a second Start on a started Worker. It wraps
// leasehold.ErrStarted.
var ErrStarted = lifecycle.Started("worker: already started")

// Worker is one process of a fleet: it owns its share of a group's
// partitions and runs its source on them, the queue's jobs
// (Config.Workers) or a Kafka consumer (Config.Kafka). Create it with New,
// then Start it (or Run it); Stop it to leave the group gracefully. A
// stopped Worker cannot be restarted.
type Worker struct {
	cfg     Config
	pool    *pgxpool.Pool
	qpool   *pgxpool.Pool // the queue's own pool (nil for Kafka); closed at Stop
	member  *partition.Member
	sched   *periodic.Scheduler // nil without Schedules
	src     source
	metrics *metrics
	log     *slog.Logger

	life    lifecycle.Service // Start and Stop: once each, serialised
	opened  bool              // the source was opened: close it at Stop
	relayed bool              // the relay was opened: close it at Stop
	srv     *http.Server
	srvDone chan struct{}
	ready   chan struct{} // closed once started
	stop    chan struct{} // closed when Stop begins
	started time.Time     // when start succeeded

	// For the "worker: stopped" summary.
	grants, handoffs atomic.Int64
}

// New returns a Worker of cfg.Group in db; it logs to db's logger. It
// validates cfg, registers the metrics and does no I/O.
func New(db *leasehold.DB, cfg Config) (*Worker, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := db.Logger().With("component", "worker", "group", cfg.Group)
	w := &Worker{cfg: cfg, pool: db.Pool(), log: log, ready: make(chan struct{}), stop: make(chan struct{})}

	lc := cfg.Lease
	ttl := lc.TTL
	if ttl == 0 {
		ttl = lease.DefaultTTL
	}
	handoff := cfg.HandoffTimeout
	if handoff == 0 {
		handoff = ttl
	}
	labels := prometheus.Labels{"group": cfg.Group}
	owned := func() map[int]partition.Ownership { return w.member.Owned() }
	w.metrics = newMetrics(labels, func() float64 { return float64(len(owned())) })
	lc.Hooks = w.metrics.leaseHooks(lc.Hooks)
	if cfg.Kafka != nil {
		w.src = newKafkaSource(cfg.Kafka, cfg.Group, labels)
	} else {
		grace := cfg.StopGrace
		if grace == 0 {
			grace = handoff / 2
		}
		if grace >= handoff {
			return nil, fmt.Errorf("%w: StopGrace %v must be shorter than HandoffTimeout %v", ErrInvalidConfig, grace, handoff)
		}
		// The queue runs on a pool of the worker's own, a clone of db's
		// whose idle connections close after ConnMaxIdleTime.
		qpool, err := store.ClonePool(db.Pool(), cfg.ConnMaxIdleTime)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		w.qpool = qpool
		qdb, err := db.WithPool(qpool)
		if err == nil {
			w.src, err = newQueueSource(qdb, db, cfg, grace, labels, owned)
		}
		if err != nil {
			qpool.Close()
			return nil, err
		}
	}
	collectors := w.src.collectors()
	if cfg.Relay != nil {
		collectors = append(collectors, &relayCollector{r: cfg.Relay, labels: labels})
	}
	if err := w.metrics.register(cfg.Registerer, collectors...); err != nil {
		w.closePool(context.Background())
		return nil, fmt.Errorf("%w: metrics: %v", ErrInvalidConfig, err)
	}
	w.member, err = partition.New(db, partition.Config{
		Group: cfg.Group, Partitions: cfg.Partitions, ID: cfg.ID, Run: w.run, Lease: lc,
		PollInterval: cfg.MembershipPollInterval, HandoffTimeout: handoff,
	})
	if err != nil {
		w.metrics.unregister()
		w.closePool(context.Background())
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	w.cfg.ID = w.member.ID()
	w.log = w.log.With("member", w.cfg.ID)
	if len(cfg.Schedules) > 0 {
		pl := cfg.Lease
		pl.Hooks, pl.Rand = lease.Hooks{}, nil // a Rand is not shared between lease Clients
		w.sched, err = periodic.New(db, periodic.Config{Group: cfg.Group, Schedules: cfg.Schedules, ID: w.cfg.ID, Lease: pl,
			Clock: cfg.Lease.Clock, Fence: cfg.Queue.Fence,
			Queue: queue.Config{TracerProvider: cfg.Queue.TracerProvider, Propagator: cfg.Queue.Propagator}})
		if err != nil {
			w.metrics.unregister()
			w.member.Stop(context.Background()) // never started: releases its resources only
			w.closePool(context.Background())
			return nil, fmt.Errorf("%w: Schedules: %w", ErrInvalidConfig, err)
		}
	}
	if q, ok := w.src.(*queueSource); ok {
		if max := int(db.Pool().Config().MaxConns); max < min(q.proc.Config().Concurrency, cfg.Partitions) {
			w.log.Info("worker: the pool has fewer connections than handlers may run at once; "+
				"transactional handlers will wait for connections", "pool_max_conns", max,
				"concurrency", q.proc.Config().Concurrency)
		}
	}
	return w, nil
}

// ID returns the worker's member id.
func (w *Worker) ID() string { return w.cfg.ID }

// Owned returns the partitions this worker holds now, with their tokens.
func (w *Worker) Owned() map[int]partition.Ownership { return w.member.Owned() }

// run is the member's Run: the source's, observed.
func (w *Worker) run(ctx context.Context, o partition.Ownership) {
	w.metrics.grants.Inc()
	w.grants.Add(1)
	w.log.Debug("worker: partition granted", "partition", o.Partition, "token", int64(o.Token), "lease", o.Lease.Name())
	start := time.Now()
	if w.cfg.Relay != nil {
		// The relay publishes the partition's outbox beside the source, for
		// as long as the grant lasts, and no longer than the source runs
		// (its Run may return early, or panic, giving the partition up).
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			// A panic of the relay (a bug) is logged and the relay started
			// again after a second, for as long as the grant lasts.
			for w.runRelay(rctx, o) && sleepCtx(rctx, time.Second) {
			}
		}()
		defer func() {
			cancel()
			<-done
		}()
	}
	w.src.run(ctx, o)
	cause := context.Cause(ctx)
	if errors.Is(cause, partition.ErrHandoff) {
		w.metrics.handoffs.Inc()
		w.handoffs.Add(1)
	}
	w.log.Debug("worker: partition given up", "partition", o.Partition, "token", int64(o.Token),
		"held", time.Since(start), "cause", cause)
}

// runRelay runs the outbox relay on o until ctx ends, and reports whether
// it panicked (logged).
func (w *Worker) runRelay(ctx context.Context, o partition.Ownership) (panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			panicked = true
			w.log.Error("worker: the outbox relay panicked; starting it again in a second",
				"partition", o.Partition, "token", int64(o.Token), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	w.cfg.Relay.Run(ctx, o)
	return false
}

// sleepCtx waits for d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Start opens the source (for Kafka: reads the topics' metadata, see
// kafka.Consumer.Open), starts the metrics server if MetricsAddr is set,
// joins the group, and starts claiming partitions and running the source
// on them. ctx bounds the start-up only. If Start fails, the Worker is
// stopped. A second Start returns ErrStarted; a Start on a stopped Worker
// returns ErrStopped. A Stop during Start waits for it.
func (w *Worker) Start(ctx context.Context) error {
	return w.life.Start(ctx, lifecycle.Refusals{Started: ErrStarted, Stopped: ErrStopped}, w.start, w.shutdown)
}

// start is Start's work, run once.
func (w *Worker) start(ctx context.Context) error {
	if w.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", w.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("worker: metrics server: %w", err)
		}
		w.srv = &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
		w.srvDone = make(chan struct{})
		go func() {
			defer close(w.srvDone)
			if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				w.log.Error("worker: metrics server failed", "err", err)
			}
		}()
		w.log.Info("worker: serving metrics", "addr", ln.Addr().String())
	}
	start := time.Now()
	if err := w.src.open(ctx); err != nil {
		return err
	}
	w.opened = true
	if w.cfg.Relay != nil {
		if err := w.cfg.Relay.Open(ctx, w.cfg.Group); err != nil {
			return fmt.Errorf("worker: open the outbox relay: %w", err)
		}
		w.relayed = true
	}
	if err := w.member.Start(ctx); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	if err := w.src.joined(ctx, w.cfg.Group); err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	if w.sched != nil {
		if err := w.sched.Start(ctx); err != nil {
			return fmt.Errorf("worker: start: %w", err)
		}
	}
	close(w.ready)
	w.started = time.Now()
	w.log.Info("worker: started", "partitions", w.cfg.Partitions, "took", time.Since(start))
	return nil
}

// Stop leaves the group gracefully, bounded by ctx: it stops taking new
// work, lets running jobs finish (within StopGrace, after which their
// contexts are cancelled; a Kafka batch being handled finishes and
// commits, fenced), records their outcomes, releases the leases so that
// the other workers take the partitions over at once, closes the source
// and stops the metrics server. When ctx ends first (a second signal,
// say), Stop returns at once; the leases then expire after their TTL, and
// any late write is refused by the fence. Stop on a Worker that was never
// started only releases its resources; Stop after a failed Start returns
// the error of the clean-up that Start ran. A second Stop returns the
// first one's result.
func (w *Worker) Stop(ctx context.Context) error {
	return w.life.Stop(ctx, w.shutdown, w.shutdown)
}

// shutdown stops whatever start set running (all of it after a Start, a
// part after a failed one, nothing but the member's connections and the
// metrics before any) and releases the resources.
func (w *Worker) shutdown(ctx context.Context) error {
	start := time.Now()
	close(w.stop)
	var errs []error
	if w.sched != nil {
		// First: its lease goes to another worker's scheduler at once.
		errs = append(errs, w.sched.Stop(ctx))
	}
	errs = append(errs, w.member.Stop(ctx))
	if w.opened {
		errs = append(errs, w.src.close(ctx))
	}
	if w.relayed {
		errs = append(errs, w.cfg.Relay.Close(ctx))
	}
	w.closePool(ctx)
	if w.srv != nil {
		if err := w.srv.Shutdown(ctx); err != nil {
			w.srv.Close()
			errs = append(errs, fmt.Errorf("worker: metrics server: %w", err))
		}
		<-w.srvDone // Serve has returned: nothing of the worker runs after Stop
	}
	w.metrics.unregister()
	err := errors.Join(errs...)
	if w.opened {
		args := []any{"took", time.Since(start), "grants", w.grants.Load(), "handoffs", w.handoffs.Load()}
		if !w.started.IsZero() {
			args = append(args, "uptime", start.Sub(w.started))
		}
		w.log.Info("worker: stopped", append(args, "err", err)...)
	}
	return err
}

// closePool closes the queue's pool, waiting for it until ctx ends: a
// handler still running (Stop's ctx ended first) holds a connection, and
// the pool closes once it is returned.
func (w *Worker) closePool(ctx context.Context) {
	if w.qpool == nil {
		return
	}
	closed := make(chan struct{})
	go func() {
		w.qpool.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}
