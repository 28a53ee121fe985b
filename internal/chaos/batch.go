package chaos

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/queue"
)

// batchWorkload is the batch workload: one batch (queue.CreateBatch) with
// an on-complete and an on-success follow-up of their own kinds. The
// orchestrator's producer submits its items with SubmitItems over the fault
// phase, crashes halfway (a new producer submits every item again, the
// first half as duplicates) and seals it. An item's handler appends its
// ledger row as the queue workload's jobs do, in its fenced transaction; a
// follow-up's handler appends a row to chaos_followups, fenced too, noting
// how many items' effects it saw committed. The orchestrator's side keeps
// the item keys acknowledged, for the check.
type batchWorkload struct {
	mu        sync.Mutex
	submitted []string // the item keys acknowledged to the producer
}

// batchName names the workload's batch.
const batchName = "chaos"

// batchItem is an item of the batch: the seq-th.
type batchItem struct {
	Seq int `json:"seq"`
}

// Kind names the item kind.
func (batchItem) Kind() string { return "chaos.batch_item" }

// batchComplete is the batch's on-complete follow-up.
type batchComplete struct {
	Batch string `json:"batch"`
}

// Kind names the on-complete follow-up's kind.
func (batchComplete) Kind() string { return "chaos.batch_complete" }

// batchSuccess is the batch's on-success follow-up.
type batchSuccess struct {
	Batch string `json:"batch"`
}

// Kind names the on-success follow-up's kind.
func (batchSuccess) Kind() string { return "chaos.batch_success" }

func (*batchWorkload) Name() string { return "batch" }

func (*batchWorkload) Setup(ctx context.Context, db *pgxpool.Pool, env *Env) error {
	q, err := render(env.Schema)
	if err != nil {
		return err
	}
	for _, stmt := range []string{q.ledger, q.followups} {
		if _, err := db.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("chaos: ledger: %w", err)
		}
	}
	if _, err := db.Exec(ctx, q.group, env.Group, env.Partitions); err != nil {
		return fmt.Errorf("chaos: group: %w", err)
	}
	return nil
}

func (*batchWorkload) Close() error { return nil }

// itemKey is the item key of the i-th item.
func itemKey(i int) string { return fmt.Sprintf("i-%d", i) }

// batchSpec is the workload's batch.
func batchSpec(env Env) queue.BatchSpec {
	return queue.BatchSpec{Group: env.Group, Name: batchName, Description: "leasehold chaos: the batch workload",
		OnComplete: &queue.FollowUp{Args: batchComplete{Batch: batchName}},
		OnSuccess:  &queue.FollowUp{Args: batchSuccess{Batch: batchName}}}
}

// Feed creates the batch and submits its n items, item i not before
// i/n of d, in chunks of a feed tick's items: first the first half, by a
// producer that then crashes (its client dropped), then all n by a new
// producer, which finds the first half in the batch already (duplicates,
// no-ops), and seals the batch. A producer whose submission failed (the
// database restarts, say) submits every item again from the first, as a
// producer that crashed does. It returns the ids of the items' jobs.
func (w *batchWorkload) Feed(ctx context.Context, db *pgxpool.Pool, env Env, n int, d time.Duration) ([]int64, error) {
	ticks := max(1, int(d/feedTick))
	chunk := max(1, (n+ticks-1)/ticks)
	start := time.Now()
	items := func(upto int) iter.Seq2[queue.Item, error] {
		return func(yield func(queue.Item, error) bool) {
			for i := range upto {
				if !sleepUntil(ctx, start.Add(time.Duration(int64(d)*int64(i)/int64(max(n, 1))))) {
					yield(queue.Item{}, ctx.Err())
					return
				}
				it := queue.Item{ID: itemKey(i), Key: fmt.Sprint("k", i%max(env.Keys, 1)), Args: batchItem{Seq: i}}
				if !yield(it, nil) {
					return
				}
			}
		}
	}
	for _, upto := range []int{n / 2, n} {
		if err := w.produce(ctx, db, env, chunk, upto, items(upto)); err != nil {
			return nil, err
		}
		w.acknowledge(upto)
	}
	c, err := newBatchClient(db, env, chunk)
	if err != nil {
		return nil, err
	}
	if err := retry(ctx, func() error { _, err := c.SealBatch(ctx, env.Group, batchName); return err }); err != nil {
		return nil, fmt.Errorf("chaos: seal the batch: %w", err)
	}
	var jobs []batchJob
	err = retry(ctx, func() (err error) { jobs, err = readItems(ctx, db, env); return err })
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids, err
}

// produce is one producer: a new client creates the batch (again: the same
// spec returns it) and submits the items of seq, all upto of them, each
// acknowledged, trying again from the first after a failure.
func (w *batchWorkload) produce(ctx context.Context, db *pgxpool.Pool, env Env, chunk, upto int, seq iter.Seq2[queue.Item, error]) error {
	c, err := newBatchClient(db, env, chunk)
	if err != nil {
		return err
	}
	// The workers record their kinds when they first serve a partition:
	// until then the batch's follow-ups are refused (ErrNoHandler).
	err = retry(ctx, func() error { _, err := c.CreateBatch(ctx, batchSpec(env)); return err }, queue.ErrNoHandler)
	if err != nil {
		return fmt.Errorf("chaos: create the batch: %w", err)
	}
	return retry(ctx, func() error {
		a, err := c.SubmitItems(ctx, env.Group, batchName, seq)
		if err == nil && (a.Items != upto || a.Added+a.Duplicates != upto) {
			return fmt.Errorf("chaos: submitted %d items, SubmitItems counts %+v", upto, a)
		}
		if err != nil {
			return fmt.Errorf("chaos: submit the batch's items: %w", err)
		}
		return nil
	})
}

// acknowledge records that the first upto items were acknowledged.
func (w *batchWorkload) acknowledge(upto int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.submitted); i < upto; i++ {
		w.submitted = append(w.submitted, itemKey(i))
	}
}

// retry runs op until it succeeds, fails for good (an error of the batch
// API's own, or an error of no database, neither of them one of again), or
// ctx ends.
func retry(ctx context.Context, op func() error, again ...error) error {
	permanent := []error{queue.ErrInvalidBatch, queue.ErrBatchExists, queue.ErrUnknownBatch, queue.ErrBatchSealed,
		queue.ErrBatchCancelled, queue.ErrInvalidItem, queue.ErrItemConflict, queue.ErrNoHandler}
	for {
		err := op()
		if err == nil {
			return nil
		}
		transient := true
		for _, p := range permanent {
			if errors.Is(err, p) {
				transient = false
			}
		}
		for _, a := range again {
			transient = transient || errors.Is(err, a)
		}
		if !transient || ctx.Err() != nil {
			return err
		}
		// The outcome is unknown (the database restarts, say): again.
		if !sleepFor(ctx, 200*time.Millisecond) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// newBatchClient returns a producer's queue client.
func newBatchClient(db *pgxpool.Pool, env Env, chunk int) (*queue.Client, error) {
	h, err := handle(db, env.Schema, nil)
	if err != nil {
		return nil, err
	}
	return queue.New(h, queue.Config{MaxAttempts: maxAttempts, SubmitChunk: chunk})
}

// Items returns how many items the batch has.
func (*batchWorkload) Items(ctx context.Context, db *pgxpool.Pool, env Env) (int, error) {
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var n int
	err = db.QueryRow(ctx, q.batchCount, env.Group).Scan(&n)
	return n, err
}

// Outstanding returns the pending jobs (items and follow-ups), plus one
// while the batch is not finished: sealed, its last item's completion
// enqueues the follow-ups in the same transaction.
func (*batchWorkload) Outstanding(ctx context.Context, db *pgxpool.Pool, env Env) (int, error) {
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var n int
	err = db.QueryRow(ctx, q.batchOutstanding, env.Group).Scan(&n)
	return n, err
}

func (*batchWorkload) Applied(ctx context.Context, db *pgxpool.Pool, env Env) (int64, error) {
	return queueWorkload{}.Applied(ctx, db, env)
}

// batchJob is a row of sqlBatchItems.
type batchJob struct {
	Job
	Item string
}

// readItems reads the batch's items.
func readItems(ctx context.Context, db *pgxpool.Pool, env Env) ([]batchJob, error) {
	q, err := render(env.Schema)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, q.batchItems, env.Group)
	if err != nil {
		return nil, fmt.Errorf("chaos: read items: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (batchJob, error) {
		var j batchJob
		err := r.Scan(&j.ID, &j.Key, &j.Partition, &j.State, &j.Item)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: read items: %w", err)
	}
	return items, nil
}

// Collect reads the batch's items (the Jobs), their ledger, the batch's
// progress, its follow-up jobs and their runs.
func (w *batchWorkload) Collect(ctx context.Context, db *pgxpool.Pool, env Env) (Input, error) {
	q, err := render(env.Schema)
	if err != nil {
		return Input{}, err
	}
	w.mu.Lock()
	b := &BatchRun{Submitted: append([]string(nil), w.submitted...), ItemKeys: map[int64]string{}}
	w.mu.Unlock()
	items, err := readItems(ctx, db, env)
	if err != nil {
		return Input{}, err
	}
	in := Input{Batch: b}
	for _, j := range items {
		in.Jobs = append(in.Jobs, j.Job)
		b.ItemKeys[j.ID] = j.Item
	}
	rows, err := db.Query(ctx, q.entries)
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read ledger: %w", err)
	}
	if in.Ledger, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Entry]); err != nil {
		return Input{}, fmt.Errorf("chaos: read ledger: %w", err)
	}
	c, err := newBatchClient(db, env, 1)
	if err != nil {
		return Input{}, err
	}
	if b.Progress, err = c.Batch(ctx, env.Group, batchName); err != nil && !errors.Is(err, queue.ErrUnknownBatch) {
		return Input{}, fmt.Errorf("chaos: read the batch: %w", err)
	}
	rows, err = db.Query(ctx, q.batchFollowups, env.Group)
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read follow-ups: %w", err)
	}
	if b.FollowUpJobs, err = pgx.CollectRows(rows, pgx.RowToStructByPos[FollowUpJob]); err != nil {
		return Input{}, fmt.Errorf("chaos: read follow-ups: %w", err)
	}
	rows, err = db.Query(ctx, q.followupRuns)
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read follow-up runs: %w", err)
	}
	if b.FollowUpRuns, err = pgx.CollectRows(rows, pgx.RowToStructByPos[FollowUpRun]); err != nil {
		return Input{}, fmt.Errorf("chaos: read follow-up runs: %w", err)
	}
	return in, nil
}

// Work runs a queue worker with the item's and the follow-ups' handlers.
func (*batchWorkload) Work(ctx context.Context, db *pgxpool.Pool, w WorkerEnv) error {
	q, err := render(w.Schema)
	if err != nil {
		return err
	}
	return runQueue(ctx, db, w, func(ws *queue.Workers) {
		handleEffect(ws, db, w, func(j *queue.Work[batchItem]) (string, []any) {
			return q.apply, []any{j.ID, j.Key, j.Partition, int64(j.Token), w.ID}
		})
		handleEffect(ws, db, w, func(j *queue.Work[batchComplete]) (string, []any) {
			return q.followupApply, []any{j.ID, FollowUpComplete, j.Batch, j.Partition, int64(j.Token), w.ID}
		})
		handleEffect(ws, db, w, func(j *queue.Work[batchSuccess]) (string, []any) {
			return q.followupApply, []any{j.ID, FollowUpSuccess, j.Batch, j.Partition, int64(j.Token), w.ID}
		})
	})
}
