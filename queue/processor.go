package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/gather"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/outboxtx"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// ProcessorConfig configures a Processor.
type ProcessorConfig struct {
	// Workers holds the handlers. Required.
	Workers *Workers
	// BatchSize is how many due jobs one fetch looks at, and the most
	// outcomes one completion statement records at once (a batch handler's
	// batch is at most this long too). Defaults to 100.
	BatchSize int
	// Window is how many jobs of one partition the owner holds at once:
	// fetched and not yet settled (waiting for their key's earlier job or
	// for a handler slot, running, or waiting for their outcome to be
	// recorded). The owner fetches again whenever the window has room, while
	// jobs run. Defaults to 2 × max(BatchSize, PartitionConcurrency).
	Window int
	// CompleteInterval is how long an outcome may wait to be recorded
	// together with later ones, of any of the member's partitions: one
	// fenced statement records them all (see docs/queue.md); BatchSize
	// outcomes are recorded at once. While a completion statement runs, the
	// outcomes that come meanwhile wait for it, and are recorded together
	// after it. A transactional job waiting for its key's earlier outcomes
	// has them recorded at once. Defaults to 100ms (see docs/queue.md: under
	// a trickle, shorter intervals record an outcome or two per statement;
	// the interval delays when an outcome is visible, not when the next
	// job starts).
	CompleteInterval time.Duration
	// FetchCooldown is how long the member waits, after a fetch that found
	// its partitions caught up (every partition got fewer due jobs than it
	// had room for), before its next fetch statement: the partitions woken
	// meanwhile are read together by it (see docs/queue.md). A fetch after
	// one that found a backlog runs at once. Under a steady trickle of
	// jobs it trades at most this much latency for a fetch statement per
	// several jobs instead of one per job. Defaults to 10ms; negative means
	// no wait.
	FetchCooldown time.Duration
	// PollInterval is how often the member polls for due jobs that no
	// notification announced (scheduled or retried jobs that came due,
	// notifications lost; see Listen): one statement per interval for all
	// its partitions, which wakes those with due jobs and learns which come
	// due before the next poll, polling again then; it also polls when a
	// retry or snooze it recorded comes due, and after a grant. So a job due
	// later starts on time unless it was enqueued less than PollInterval
	// before it is due. Defaults to 1s (an idle member's largest cost: one
	// transaction per interval).
	PollInterval time.Duration
	// Concurrency is how many handlers run at once across all the
	// partitions this Processor runs. Defaults to 100.
	Concurrency int
	// PartitionConcurrency is how many jobs of one partition run at once.
	// They are jobs without a key or of different keys: a key's jobs run
	// one at a time, in order, unless its key limit is above 1
	// (Policy.KeyConcurrency). Defaults to Concurrency (no cap below
	// it); a larger value is capped at Concurrency, with a warning.
	PartitionConcurrency int
	// JobTimeout bounds each run of a handler (for a batch handler, each
	// batch): its context's deadline. A run that times out is a failed
	// attempt. Defaults to 1m; a negative value means no timeout.
	JobTimeout time.Duration
	// StopGrace is how long running handlers keep their contexts after a
	// graceful stop (Run's context cancelled with partition.ErrStopped), to
	// finish their jobs; then their contexts are cancelled. Keep it below
	// the Member's HandoffTimeout, so that their outcomes are recorded
	// before the partition is released. Defaults to 5s.
	StopGrace time.Duration
	// MinRetry and MaxRetry bound the delay before a failed job runs again:
	// full jitter over min(MaxRetry, MinRetry × 2^(attempt-1)). Default to
	// 1s and 1h.
	MinRetry, MaxRetry time.Duration
	// UnknownKindDelay is how long a job whose kind has no handler waits
	// before it is looked at again; it is kept pending, spends no attempt,
	// and the problem is recorded on the job and logged. Defaults to 1m.
	UnknownKindDelay time.Duration
	// Retention is how long finished (completed, discarded, cancelled) jobs
	// are kept; the member deletes older ones of all its partitions at the
	// first poll after it gets a partition and every RetentionInterval
	// after, idle or busy, in statements of at most RetainChunk rows.
	// Defaults to 24h.
	Retention time.Duration
	// RetentionInterval is how often the member deletes the finished jobs
	// of its partitions older than Retention. Defaults to 1m.
	RetentionInterval time.Duration
	// BatchRetention is how long a finished batch (its row, name, progress
	// and counters) is kept once its items are gone (deleted Retention
	// after it finished): then retention deletes it, and its name can be
	// taken again (a producer running again would create it anew and run
	// every item again). Defaults to DefaultBatchRetention (30 days): long
	// past any producer's resume, while a batch's few rows (one, and two
	// per partition) cost little. Each retention round deletes at most
	// RetainBatches of them per group (see docs/batches.md).
	BatchRetention time.Duration
	// Fence sets the timeouts of the fenced transactions. Defaults as in
	// lease.FenceConfig.
	Fence lease.FenceConfig
	// PublishInterval is how often the Processor publishes the jobs it
	// runs (see docs/running.md): at most one statement per interval for
	// all its partitions, writing only the partitions whose running set
	// changed, and checking whether a running job was cancelled (the
	// fallback of the cancel notification). Defaults to 1s.
	PublishInterval time.Duration
	// Hooks observe job runs, for metrics. Defaults to none.
	Hooks Hooks
	// KeyWeight gives keys weights in the fair turns of their partition
	// (see docs/control.md): when a partition has more jobs ready than it
	// may start, the next start goes to the ready job whose key runs the
	// fewest jobs per unit of weight, so that a key of weight 2 runs twice
	// as many jobs at once as a key of weight 1 while both have jobs ready
	// (the jobs without a key count as one key of weight 1). It is called
	// once per key while the partition holds jobs of the key; a weight
	// below 1 counts as 1. Weights matter for keys that may run several
	// jobs at once (Policy.KeyConcurrency): a key's jobs run one at a time
	// by default. Defaults to nil: jobs start in the order they were
	// fetched.
	KeyWeight func(key string) int
	// Rand is the source of retry jitter. Defaults to a random seed.
	Rand *rand.Rand
	// TracerProvider makes the leasehold.fetch, leasehold.run and
	// leasehold.complete spans (see docs/tracing.md).
	// Defaults to none: no spans, no cost. Pass otel.GetTracerProvider()
	// for the global one (the OpenTelemetry convention; it costs about 1µs
	// a job even with no SDK installed).
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context stored with a job (see
	// Config.Propagator): the parent of its run's span. Used only with a
	// TracerProvider. Defaults to the global one, otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
	// PauseInterval is how often the Processor reads the pauses of its
	// groups (one statement for all of them; see Client.Pause), besides
	// reading them at once when Listen hears a pause or resume; the
	// member's poll reads them too, every PollInterval, and this read runs
	// only when none came within PauseInterval. Defaults to 2s (more than
	// PollInterval's default: at 1s each, the two raced and the pauses were
	// read on their own half the time).
	PauseInterval time.Duration
	// SlotLease configures the leases of the slots of the kinds with a
	// Policy.GroupConcurrency: a kind's N slots in a group are N named
	// leases, which the Processor acquires while it has jobs of the kind
	// waiting and gives up when they are idle or their turn ends (see
	// groupslots.go and docs/control.md); its TTL bounds how long a slot
	// of a crashed worker stays taken. Owner must be empty (it is derived
	// from the member's id). Defaults as in lease.Config; a worker.Worker
	// sets it to its own Lease.
	SlotLease lease.Config
	// SlotHandoffTimeout bounds how long a slot that is given up (its
	// turn ended, or the Processor stops serving its group) waits for the
	// job running on it: the job's context is cancelled at nine tenths of
	// it, and the slot is released when it has passed. Defaults to
	// SlotLease's TTL (15s by default); a worker.Worker sets it to its
	// HandoffTimeout.
	SlotHandoffTimeout time.Duration
	// SlotDB is the DB the slot leases' clients run on: their pool is
	// derived from its pool, and shared with the partition members'
	// derived from the same pool with the same MaxConns and
	// StatementTimeout (see lease.Config.MaxConns). Defaults to the
	// Processor's DB; a worker.Worker sets it to its own, so that the
	// slots open no connection of their own.
	SlotDB *leasehold.DB
}

// Processor runs the jobs of the partitions a member owns. Pass its Run as
// partition.Config.Run, and run Listen beside it so that enqueued jobs
// start at once.
type Processor struct {
	// unfair turns fair turns off (fair.go): the control of the fairness
	// test, never set otherwise.
	unfair bool
	// limited are the jobs held back by limits now (limited.go).
	heldBack limitedCounts
	pool     *pgxpool.Pool
	cfg      ProcessorConfig
	schema   string        // for the listener shared with the pool's other components
	listen   store.Session // db's listening session (Listen)
	q        store.QueueSQL
	st       *store.Statements // for the outbox's statements (outboxtx)
	place    string            // the database's, for the outbox's wake-ups (outboxtx.Place)
	runq     store.RunningSQL
	pz       store.PauseSQL
	in       store.InsightSQL
	fence    *lease.Fence
	retry    *backoff.Backoff
	log      *slog.Logger
	trace    tracing
	fails    *lograte.Limiter // repeated failures of all partitions, by kind
	slots    chan struct{}    // Concurrency
	work     chan func()      // to an idle runner goroutine (see spawn)
	// timeoutCause is the cause of a handler context that timed out.
	timeoutCause error

	batches batches
	pauses  pauses
	// completer records the outcomes of all the Processor's grants (see
	// completer.go).
	completer *completer
	// fetcher reads the due jobs of all its partitions (see fetcher.go).
	fetcher *fetcher
	// opener and closer record the runs of its grants (see runs.go).
	opener, closer *gather.Batcher[runAsk]
	// tallies are the outcome counts and fenced events to record (see
	// record.go).
	tallies tallies
	// kinds holds the groups whose kinds this Processor has recorded
	// (see registerKinds).
	kinds   sync.Map
	kindsMu sync.Mutex // one RecordKinds statement at a time

	mu    sync.Mutex
	wakes map[wakeKey][]chan struct{} // by partition, for Listen
	// unretained is set when a partition is subscribed that the member's
	// retention has not covered yet; the next poll starts a round.
	unretained bool
	// nextDue is the earliest time a job is known to come due that the
	// member's loop has not taken yet (zero: none): a retry or snooze this
	// Processor recorded, or now when a partition was granted (to learn
	// when its jobs come due). dueC is signalled when it is set.
	nextDue time.Time
	dueC    chan struct{}
	// grants are the running sets of the grants this Processor serves, by
	// partition (see running.go); serving counts the grants whose runs have
	// not ended. The member's loop (member.go) runs while serving > 0:
	// stopMember ends it, and memberDone is closed when it returned.
	grants     map[wakeKey][]*runningSet
	serving    int
	stopMember context.CancelFunc
	memberDone chan struct{}
	members    atomic.Int32 // member loops running (for tests)
	polls      atomic.Int64 // polls run (for tests)
	fetched    atomic.Int64 // partitions' asks answered by fetches (for tests)
	// unapplied counts outcomes of batch items a completion could not
	// apply (see unappliedError): a bug, logged at ERROR.
	unapplied atomic.Int64
	// groupSlots are the slots of the kinds with a GroupConcurrency (see
	// groupslots.go).
	groupSlots slotState
}

// NewProcessor returns a Processor whose jobs and handlers' transactions
// run on db's pool; it logs to db's logger. It validates cfg and does no
// I/O.
func NewProcessor(db *leasehold.DB, cfg ProcessorConfig) (*Processor, error) {
	switch {
	case db.Pool() == nil:
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	case cfg.Workers == nil:
		return nil, fmt.Errorf("%w: Workers required", ErrInvalidConfig)
	case cfg.Workers.check() != nil:
		return nil, fmt.Errorf("%w: Workers: %w", ErrInvalidConfig, cfg.Workers.check())
	case cfg.BatchSize < 0 || cfg.Window < 0 || cfg.CompleteInterval < 0 || cfg.PollInterval < 0 || cfg.MinRetry < 0 || cfg.MaxRetry < 0 ||
		cfg.UnknownKindDelay < 0 || cfg.PauseInterval < 0 || cfg.Retention < 0 || cfg.RetentionInterval < 0 || cfg.BatchRetention < 0 || cfg.PublishInterval < 0 || cfg.StopGrace < 0 || cfg.Concurrency < 0 || cfg.PartitionConcurrency < 0 || cfg.SlotHandoffTimeout < 0:
		return nil, fmt.Errorf("%w: negative value", ErrInvalidConfig)
	case cfg.SlotDB != nil && cfg.SlotDB.Pool() == nil:
		return nil, fmt.Errorf("%w: SlotDB: a zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	case cfg.SlotLease.Owner != "":
		return nil, fmt.Errorf("%w: SlotLease.Owner must be empty: the slots' lease clients derive it from their grants'", ErrInvalidConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	defInt(&cfg.BatchSize, 100)
	defInt(&cfg.Concurrency, 100)
	defInt(&cfg.PartitionConcurrency, cfg.Concurrency)
	if cfg.PartitionConcurrency > cfg.Concurrency {
		db.Logger().Warn("queue: PartitionConcurrency is above Concurrency; capped at Concurrency",
			"partition_concurrency", cfg.PartitionConcurrency, "concurrency", cfg.Concurrency)
		cfg.PartitionConcurrency = cfg.Concurrency
	}
	defInt(&cfg.Window, 2*max(cfg.BatchSize, cfg.PartitionConcurrency))
	def(&cfg.CompleteInterval, 100*time.Millisecond)
	def(&cfg.PollInterval, time.Second)
	def(&cfg.FetchCooldown, 10*time.Millisecond)
	def(&cfg.JobTimeout, time.Minute)
	def(&cfg.StopGrace, 5*time.Second)
	def(&cfg.MinRetry, time.Second)
	def(&cfg.MaxRetry, time.Hour)
	def(&cfg.UnknownKindDelay, time.Minute)
	def(&cfg.PauseInterval, 2*time.Second)
	def(&cfg.Retention, 24*time.Hour)
	def(&cfg.RetentionInterval, time.Minute)
	def(&cfg.BatchRetention, DefaultBatchRetention)
	def(&cfg.PublishInterval, time.Second)
	if cfg.SlotDB == nil {
		cfg.SlotDB = db
	}
	if err := checkSlotLease(cfg); err != nil {
		return nil, err
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	f, err := lease.NewFence(db, cfg.Fence)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	fails, err := lograte.New(db.Logger(), lograte.Config{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	p := &Processor{pool: db.Pool(), schema: db.Schema(), listen: db.Listen(), cfg: cfg, dueC: make(chan struct{}, 1), q: st.Queue, st: st, place: outboxtx.Place(db.Pool()), runq: st.Running, pz: st.Pause, in: st.Insight, fence: f, grants: make(map[wakeKey][]*runningSet), batches: batches{q: st.Batch, channel: st.Queue.Channel},
		retry: backoff.New(cfg.MinRetry, cfg.MaxRetry, cfg.Rand), log: db.Logger(), fails: fails,
		trace: newTracing(cfg.TracerProvider, cfg.Propagator),
		slots: make(chan struct{}, cfg.Concurrency), work: make(chan func()), wakes: make(map[wakeKey][]chan struct{}),
		timeoutCause: fmt.Errorf("%w after %v", ErrJobTimeout, cfg.JobTimeout)}
	p.pauses.p = p
	p.groupSlots.init(p, cfg)
	p.completer = newCompleter(p)
	p.fetcher = &fetcher{p: p}
	p.opener, p.closer = runBatcher(p.sendOpen), runBatcher(p.sendClose)
	return p, nil
}

// Config returns the Processor's configuration, with defaults filled in.
func (p *Processor) Config() ProcessorConfig { return p.cfg }

// Run processes the due jobs of o's partition until ctx is cancelled: then
// it takes no new job, records the outcomes of the jobs it ran, and
// returns. It returns at once when a fenced write is refused: a newer owner
// has the partition.
//
// Jobs run in a continuous pipeline: the partition's owner keeps fetching
// while jobs run, up to Window jobs held, runs jobs without a key (and jobs
// of different keys) concurrently, a key's jobs one at a time in id order,
// and records outcomes in batches as they come.
//
// Handlers' contexts are cancelled when the partition is handed off or its
// lease is lost or released. When ctx is cancelled by partition.ErrStopped
// (a graceful stop), running handlers keep their contexts for StopGrace to
// finish their jobs.
//
// Run is Serve for partition.Config.Run, which returns nothing: it logs
// the error Serve returns (at ERROR for ErrNoLease).
func (p *Processor) Run(ctx context.Context, o partition.Ownership) {
	err := p.Serve(ctx, o)
	if errors.Is(err, ErrNoLease) {
		p.log.Error("queue: not running", "group", o.Group, "partition", o.Partition, "token", int64(o.Token), "err", err)
	}
	// A fenced run was logged where it was refused.
}

// Serve is Run, returning why it ended early: an error wrapping ErrNoLease,
// at once, when o has no Lease (o must be a partition.Member's grant); a
// error wrapping fence.ErrFenced (a *fence.FencedError) when a fenced write was
// refused, a newer owner having the partition. It returns nil once ctx is
// cancelled, or its lease ended, and the run is over.
func (p *Processor) Serve(ctx context.Context, o partition.Ownership) error {
	if o.Lease == nil {
		return fmt.Errorf("%w (group %q, partition %d)", ErrNoLease, o.Group, o.Partition)
	}
	log := p.log.With("group", o.Group, "partition", o.Partition, "token", int64(o.Token))
	hctx, cancel := handlerContext(ctx, o, p.cfg.StopGrace)
	defer cancel()
	wake := p.subscribe(o.Group, o.Partition)
	defer p.unsubscribe(o.Group, o.Partition, wake)
	p.registerKinds(ctx, o)
	set := p.register(o)
	defer p.unregister(set)
	// Before the first fetch: a group paused before this worker started
	// stays paused.
	defer p.pauses.unwatch(o.Group)
	if !p.pauses.watch(ctx, o.Group) || !p.pauses.await(ctx, hctx, o.Group, wake) {
		if hctx.Err() != nil && ctx.Err() == nil {
			<-ctx.Done() // the lease ended: no job can run under this grant
		}
		return nil
	}
	var st runState
	if ok, err := p.open(ctx, hctx, o, log, &st, wake); !ok {
		return err // fenced, or ended before the previous run's jobs were recovered
	}
	clean, fenced := p.pipeline(ctx, hctx, o, log, wake, set, &st)
	if hctx.Err() != nil && ctx.Err() == nil {
		<-ctx.Done() // the lease ended: no job can run under this grant
		return fenced
	}
	if clean { // never after a fenced write
		// Every job this run started has its outcome recorded, or was
		// interrupted without spending an attempt, and the jobs the
		// previous run may have left running were recovered.
		p.closeRun(ctx, o, log, &st.rates)
	}
	return fenced
}

// open records o's grant as the partition's running one and, if the
// previous run ended abruptly, recovers its jobs (see recover.go). It
// reports whether the pipeline may start, and the fence's refusal if it
// may not because a newer owner has the partition.
func (p *Processor) open(ctx, hctx context.Context, o partition.Ownership, log *slog.Logger, st *runState, wake <-chan struct{}) (bool, error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for ctx.Err() == nil && hctx.Err() == nil {
		n, err := p.step(ctx, hctx, o, log, st)
		switch {
		case errors.Is(err, fence.ErrFenced):
			p.fail("fenced", o, "queue: fenced: a newer owner has the partition", "err", err)
			return false, err
		case err != nil && ctx.Err() == nil:
			p.fail("open", o, "queue: opening the run failed", "err", err)
		case err == nil && st.opened && !st.recovering:
			p.fails.Recovered("open", "queue: opening runs recovered")
			return true, nil
		}
		if n > 0 && err == nil {
			continue
		}
		timer.Reset(p.cfg.PollInterval)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-wake:
		}
	}
	if hctx.Err() != nil && ctx.Err() == nil {
		<-ctx.Done()
	}
	return false, nil
}

// fail logs a failure of kind on o's partition through the Processor's
// rate limiter: the partitions of one Processor share its lines, so an
// outage logs one line per interval, not one per partition.
func (p *Processor) fail(kind string, o partition.Ownership, msg string, args ...any) {
	p.fails.Fail(kind, msg, append([]any{"group", o.Group, "partition", o.Partition, "token", int64(o.Token)}, args...)...)
}

// handlerContext returns the base of the handlers' contexts of one grant:
// cancelled when the grant's lease ends, and when ctx is, or grace later if
// ctx was cancelled by a graceful stop.
func handlerContext(ctx context.Context, o partition.Ownership, grace time.Duration) (context.Context, context.CancelFunc) {
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var graceTimer *time.Timer
	var mu sync.Mutex
	stopRun := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if !errors.Is(cause, partition.ErrStopped) {
			cancel(cause)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		graceTimer = time.AfterFunc(grace, func() { cancel(cause) })
	})
	stopLease := func() bool { return true }
	if o.Lease != nil {
		lctx := o.Lease.Context()
		stopLease = context.AfterFunc(lctx, func() { cancel(context.Cause(lctx)) })
	}
	return hctx, func() {
		stopRun()
		stopLease()
		mu.Lock()
		if graceTimer != nil {
			graceTimer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// jobContext returns the context of one run of h: hctx with the timeout
// of h's policy, else JobTimeout, and cancel, which cancels it with a
// cause (ErrJobCancelled for a job cancelled while it runs, see
// running.go). Release it when the run ends.
//
// Two standard contexts, the timeout's inside the cancelable one, rather
// than one with a hand-made deadline: a context the handler derives from
// it (an HTTP request's, a query's) reports a timeout as
// context.DeadlineExceeded, as Go code expects, and an operator's cancel as
// context.Canceled, each with its cause. It costs five allocations (about
// 450 bytes) more than a context.WithTimeoutCause alone
// (BenchmarkJobContext): a price worth paying for contexts that behave as
// the standard library's.
func (p *Processor) jobContext(hctx context.Context, h handler) jobCtx {
	timeout, cause := p.cfg.JobTimeout, p.timeoutCause
	if t := h.opts.policy.Timeout; t != 0 {
		timeout, cause = t, h.opts.timeoutCause
	}
	ctx, cancel := context.WithCancelCause(hctx)
	if timeout < 0 {
		return jobCtx{ctx: ctx, cancel: cancel}
	}
	tctx, stop := context.WithTimeoutCause(ctx, timeout, cause)
	return jobCtx{ctx: tctx, cancel: cancel, stop: stop}
}

// jobCtx is the context of one run and its controls (see jobContext).
type jobCtx struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   context.CancelFunc // the timeout's (nil: none)
}

// release ends the run's context: its timer stopped, it cancelled.
func (j jobCtx) release() {
	if j.stop != nil {
		j.stop()
	}
	j.cancel(context.Canceled)
}

// runnerIdle is how long a runner goroutine waits for more work.
const runnerIdle = 10 * time.Second

// spawn runs f on an idle runner goroutine, or a new one. Runners are kept
// for a while between jobs, so that a job does not start on a fresh
// goroutine whose stack has to grow again; there are never more of them
// busy than handler slots.
func (p *Processor) spawn(f func()) {
	select {
	case p.work <- f:
	default:
		go p.runner(f)
	}
}

func (p *Processor) runner(f func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(runnerIdle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		}
	}
}
