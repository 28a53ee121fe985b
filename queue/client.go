package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// Config configures a Client.
type Config struct {
	// MaxAttempts is the attempt limit of jobs that set none. Defaults to 25.
	MaxAttempts int
	// NotifyWindow coalesces the notifications that wake idle partition
	// owners: Enqueue and EnqueueMany notify a group's partitions in their
	// statements at most once per window; an enqueue whose notification is
	// coalesced is notified by the next enqueue that notifies (a window
	// after the last), or, when none follows, 1.5 windows after it
	// committed by one statement for all the partitions pending by then.
	// (EnqueueTx in your own transaction always notifies at its commit.)
	// Defaults to 10ms; negative means every enqueue notifies in its own
	// statement.
	NotifyWindow time.Duration
	// SubmitChunk is how many items SubmitItems adds per transaction.
	// Defaults to 1000: a bigger chunk adds items no faster here (see
	// docs/benchmarks.md), and holds its batch's partitions' totals longer.
	SubmitChunk int
	// TracerProvider makes the client's leasehold.enqueue spans (see
	// docs/tracing.md).
	// Defaults to none: no spans, no trace context stored, no cost. Pass
	// otel.GetTracerProvider() for the global one (the OpenTelemetry
	// convention; it costs about 1µs a job even with no SDK installed).
	TracerProvider trace.TracerProvider
	// Propagator writes the enqueue span's context into the jobs (as JSON,
	// in jobs.trace), so that their runs join its trace. Used only with a
	// TracerProvider. Defaults to the global one, otel.GetTextMapPropagator(),
	// which carries nothing (so stores nothing) until one is installed with
	// otel.SetTextMapPropagator.
	Propagator propagation.TextMapPropagator
}

// Client enqueues jobs. It is safe for concurrent use.
type Client struct {
	pool   *pgxpool.Pool
	cfg    Config
	q      store.QueueSQL // q.Channel: the NOTIFY channel of enqueued jobs
	run    store.RunningSQL
	pz     store.PauseSQL
	in     store.InsightSQL
	notify *notifier
	log    *slog.Logger
	trace  tracing
	// batches runs the statements of batches; kinds caches, per group, the
	// kinds its workers handle (see checkKinds).
	batches batches
	kinds   sync.Map // group -> *sync.Map of kind -> true

	// spread places keyless jobs on partitions round robin.
	spread atomic.Uint64

	mu     sync.Mutex
	counts map[string]int // partition count per group; fixed once a group exists
}

// New returns a Client that enqueues on db's pool. It validates cfg and
// does no I/O.
func New(db *leasehold.DB, cfg Config) (*Client, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	if cfg.MaxAttempts < 0 || cfg.MaxAttempts > MaxAttempts {
		return nil, fmt.Errorf("%w: MaxAttempts %d", ErrInvalidConfig, cfg.MaxAttempts)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 25
	}
	if cfg.SubmitChunk < 0 || cfg.SubmitChunk > MaxListLimit {
		return nil, fmt.Errorf("%w: SubmitChunk %d is not in 0..%d", ErrInvalidConfig, cfg.SubmitChunk, MaxListLimit)
	}
	if cfg.SubmitChunk == 0 {
		cfg.SubmitChunk = 1000
	}
	if cfg.NotifyWindow == 0 {
		cfg.NotifyWindow = 10 * time.Millisecond
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	pool := db.Pool()
	c := &Client{pool: pool, cfg: cfg, q: st.Queue, run: st.Running, pz: st.Pause, in: st.Insight, notify: newNotifier(pool, st.Queue.Channel, st.Queue.Notify, cfg.NotifyWindow, db.Logger()),
		batches: batches{q: st.Batch, channel: st.Queue.Channel}, log: db.Logger(),
		counts: make(map[string]int), trace: newTracing(cfg.TracerProvider, cfg.Propagator)}
	c.spread.Store(rand.Uint64()) // clients start at different partitions
	return c, nil
}

// Enqueue enqueues one job.
func (c *Client) Enqueue(ctx context.Context, job Job) (Enqueued, error) {
	res, err := c.EnqueueTx(ctx, c.pool, job)
	if err != nil {
		return Enqueued{}, err
	}
	return res[0], nil
}

// EnqueueMany enqueues jobs in one statement: all of them, or, on any
// error, none.
func (c *Client) EnqueueMany(ctx context.Context, jobs ...Job) ([]Enqueued, error) {
	return c.EnqueueTx(ctx, c.pool, jobs...)
}

// EnqueueTx enqueues jobs in one statement on db, which may be your
// transaction: the jobs then exist only if it commits, and become visible
// to their partitions' owners when it does.
//
// On the transaction of a transactional handler (HandleTx, HandleTxBatch),
// or a savepoint of it, a job whose unique key is the one of a job the
// handler runs is its successor: it takes the key (the running job is
// completed by the same commit) instead of being a duplicate. That takes
// one more statement.
func (c *Client) EnqueueTx(ctx context.Context, db fence.Querier, jobs ...Job) (out []Enqueued, err error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if c.trace.tracer != nil {
		var span trace.Span
		ctx, span = c.trace.startEnqueue(ctx, jobs)
		defer func() { c.trace.endEnqueue(span, out, err) }()
	}
	counts, err := c.partitionCounts(ctx, db, jobs)
	if err != nil {
		return nil, err
	}
	n := len(jobs)
	groups, keys, kinds, uniques := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	parts, maxes, holds := make([]int32, n), make([]int32, n), make([]bool, n)
	prios, maxSet, keyLimits := make([]int16, n), make([]bool, n), make([]*int16, n)
	args, runAts := make([]string, n), make([]*time.Time, n)
	out = make([]Enqueued, n)
	for i, j := range jobs {
		if err := c.check(i, j); err != nil {
			return nil, err
		}
		b, err := json.Marshal(j.Args)
		if err != nil {
			return nil, &JobError{Index: i, Field: "Args", Reason: "cannot encode as JSON", Err: err}
		}
		groups[i], keys[i], kinds[i], args[i] = j.Group, j.Key, j.Args.Kind(), string(b)
		parts[i] = int32(c.partitionOf(j.Key, counts[j.Group]))
		// A job whose key runs several at once keeps no order: it never
		// holds the later ones (see Job.KeyConcurrency).
		holds[i] = j.Key == "" || j.Ordering == OrderStrict && j.KeyConcurrency <= 1
		if j.KeyConcurrency > 0 {
			kl := int16(j.KeyConcurrency)
			keyLimits[i] = &kl
		}
		out[i].Partition = int(parts[i])
		maxes[i] = int32(c.cfg.MaxAttempts)
		if j.MaxAttempts > 0 {
			maxes[i], maxSet[i] = int32(j.MaxAttempts), true
		}
		prios[i] = int16(max(j.Priority, 1))
		if !j.RunAt.IsZero() {
			runAts[i] = &jobs[i].RunAt
		}
		if j.UniqueKey != "" {
			uniques[i] = &jobs[i].UniqueKey
		}
	}
	// Our own autocommitted enqueue may leave its notification to the
	// notifier, or carry those the notifier holds; one in the caller's
	// transaction notifies at its commit.
	var due, carried []wakeKey
	var carry []string
	channel := &c.q.Channel
	if own := db == fence.Querier(c.pool); own && c.cfg.NotifyWindow > 0 {
		due = dueKeys(groups, parts, runAts)
		var notify bool
		if notify, carry, carried = c.notify.inStatement(due); !notify {
			channel = nil
		}
	}
	defer func() {
		if err != nil && len(carried) > 0 {
			c.notify.committed(carried) // not carried after all: the notifier sends them
		}
	}()
	carrier := c.trace.carrier(ctx) // the enqueue span's context, stored with the jobs
	if n == 1 && uniques[0] == nil {
		// The common Enqueue: a statement of one row (see queueEnqueueOne).
		var id int64
		var woken *int64
		if err := db.QueryRow(ctx, c.q.EnqueueOne, groups[0], parts[0], keys[0], kinds[0], args[0], maxes[0], runAts[0],
			channel, holds[0], prios[0], maxSet[0], carrier, carry, keyLimits[0]).Scan(&id, &woken); err != nil {
			return nil, enqueueErr(err)
		}
		out[0].ID = id
	} else if err := c.enqueueRows(ctx, db, out, groups, parts, keys, kinds, args, maxes, runAts, uniques, channel, holds, prios, maxSet, carrier, carry, keyLimits); err != nil {
		return nil, err
	}
	if channel == nil {
		c.notify.committed(due)
	}
	return out, nil
}

// enqueueRows runs the statement of many jobs (or of one with a unique
// key) and fills out with their ids, or marks them duplicates.
func (c *Client) enqueueRows(ctx context.Context, db fence.Querier, out []Enqueued, groups []string, parts []int32, keys, kinds []string,
	args []string, maxes []int32, runAts []*time.Time, uniques []*string, channel *string, holds []bool, prios []int16, maxSet []bool,
	carrier *string, carry []string, keyLimits []*int16) error {
	var rows pgx.Rows
	var err error
	if slices.ContainsFunc(uniques, func(u *string) bool { return u != nil }) {
		if jt, ok := db.(*jobTx); ok {
			// A transactional handler's enqueue: its jobs' successors may
			// take their unique keys.
			if err := c.releaseUnique(ctx, jt, groups, uniques); err != nil {
				return err
			}
		}
		rows, err = db.Query(ctx, c.q.Enqueue, groups, parts, keys, kinds, args, maxes, runAts, uniques, channel, holds, prios, maxSet, carrier, carry, keyLimits)
	} else {
		rows, err = db.Query(ctx, c.q.EnqueuePlain, groups, parts, keys, kinds, args, maxes, runAts, channel, holds, prios, maxSet, carrier, carry, keyLimits)
	}
	if err != nil {
		return enqueueErr(err)
	}
	for rows.Next() {
		var n int64
		var id *int64
		if err := rows.Scan(&n, &id); err != nil {
			rows.Close()
			return enqueueErr(err)
		}
		if n < 1 || int(n) > len(out) {
			rows.Close()
			return fmt.Errorf("queue: enqueue: row for input %d of %d", n, len(out))
		}
		if id == nil {
			out[n-1].Duplicate = true
		} else {
			out[n-1].ID = *id
		}
	}
	if err := rows.Err(); err != nil {
		return enqueueErr(err)
	}
	return nil
}

// releaseUnique releases the unique keys of the jobs that tx's handler
// runs, among the keys about to be enqueued in tx: each such job is
// completed by tx (or tx rolls back), so its key passes to the job enqueued
// with it instead of making that job a duplicate.
func (c *Client) releaseUnique(ctx context.Context, tx *jobTx, groups []string, uniques []*string) error {
	var gs, us []string
	for i, u := range uniques {
		if u != nil {
			gs, us = append(gs, groups[i]), append(us, *u)
		}
	}
	if _, err := tx.Exec(ctx, c.q.ReleaseUnique, tx.running, gs, us); err != nil {
		return enqueueErr(err)
	}
	return nil
}

// partitionOf returns the partition of a job with key among n:
// partition.Of(key) for a keyed job, the next one round robin for a
// keyless job.
func (c *Client) partitionOf(key string, n int) int {
	if key == "" {
		return int(c.spread.Add(1) % uint64(n))
	}
	return partition.OfString(key, n)
}

// dueKeys returns the distinct partitions of the jobs due now (no RunAt, or
// one already passed by this process's clock; a job that the database finds
// due later is not worth a notification anyway).
func dueKeys(groups []string, parts []int32, runAts []*time.Time) []wakeKey {
	var keys []wakeKey
	seen := make(map[wakeKey]bool)
	now := time.Now()
	for i := range groups {
		k := wakeKey{groups[i], int(parts[i])}
		if (runAts[i] == nil || !runAts[i].After(now)) && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

func (c *Client) check(i int, j Job) error {
	bad := func(field, reason string) error { return &JobError{Index: i, Field: field, Reason: reason} }
	switch {
	case isNil(j.Args):
		return bad("Args", "required")
	case j.Args.Kind() == "" || len(j.Args.Kind()) > 100 || !utf8.ValidString(j.Args.Kind()):
		return bad("Kind", fmt.Sprintf("%q must be 1 to 100 bytes of UTF-8", j.Args.Kind()))
	case !utf8.ValidString(j.Key):
		return bad("Key", fmt.Sprintf("%q is not valid UTF-8", j.Key))
	case len(j.Key) > 255:
		return bad("Key", fmt.Sprintf("%d bytes; at most 255 bytes of UTF-8", len(j.Key)))
	case !utf8.ValidString(j.UniqueKey):
		return bad("UniqueKey", fmt.Sprintf("%q is not valid UTF-8", j.UniqueKey))
	case len(j.UniqueKey) > 255:
		return bad("UniqueKey", fmt.Sprintf("%d bytes; at most 255 bytes of UTF-8", len(j.UniqueKey)))
	case j.Ordering != OrderStrict && j.Ordering != OrderNonBlocking:
		return bad("Ordering", fmt.Sprintf("unknown ordering %d", int(j.Ordering)))
	case j.KeyConcurrency < 0 || j.KeyConcurrency > MaxKeyConcurrency:
		return bad("KeyConcurrency", fmt.Sprintf("%d is not in 0..%d", j.KeyConcurrency, MaxKeyConcurrency))
	case j.MaxAttempts < 0 || j.MaxAttempts > MaxAttempts:
		return bad("MaxAttempts", fmt.Sprintf("%d is not in 0..%d", j.MaxAttempts, MaxAttempts))
	case j.Priority < 0 || j.Priority > MaxPriority:
		return bad("Priority", fmt.Sprintf("%d is not in 1..%d (0: the default, 1)", j.Priority, MaxPriority))
	}
	return nil
}

// MaxPriority is the lowest priority of a job (Job.Priority): priorities
// run from 1, the highest and the default, to MaxPriority.
const MaxPriority = 4

// MaxAttempts is the largest attempt limit of a job.
const MaxAttempts = 1_000_000

// isNil reports whether a is nil or a nil pointer (whose Kind method
// might panic).
func isNil(a Args) bool {
	if a == nil {
		return true
	}
	v := reflect.ValueOf(a)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// partitionCounts returns the partition count of every group of jobs,
// reading the groups it has not seen yet in one statement.
func (c *Client) partitionCounts(ctx context.Context, db fence.Querier, jobs []Job) (map[string]int, error) {
	c.mu.Lock()
	counts := make(map[string]int)
	var missing []string
	for i, j := range jobs {
		if j.Group == "" {
			c.mu.Unlock()
			return nil, &JobError{Index: i, Field: "Group", Reason: "required"}
		}
		if n, ok := c.counts[j.Group]; ok {
			counts[j.Group] = n
		} else if _, dup := counts[j.Group]; !dup {
			counts[j.Group] = 0
			missing = append(missing, j.Group)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return counts, nil
	}
	rows, err := db.Query(ctx, c.q.Groups, missing)
	if err != nil {
		return nil, enqueueErr(err)
	}
	for rows.Next() {
		var g string
		var n int
		if err := rows.Scan(&g, &n); err != nil {
			rows.Close()
			return nil, enqueueErr(err)
		}
		counts[g] = n
	}
	if err := rows.Err(); err != nil {
		return nil, enqueueErr(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range missing {
		if counts[g] == 0 {
			return nil, fmt.Errorf("%w: %q (create it with Client.EnsureGroup or `leasehold groups create`, or start a worker of it)", ErrUnknownGroup, g)
		}
		c.counts[g] = counts[g]
	}
	return counts, nil
}

func enqueueErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" { // the group was deleted under us
		return fmt.Errorf("%w: %v", ErrUnknownGroup, err)
	}
	return store.Classify("queue", "enqueue", "", err)
}
