package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// queueWorkload is the queue workload: jobs whose handler appends one row
// per job to the ledger, in the job's fenced transaction, and, for one key
// in four (plainKey), plain jobs whose handler appends a row per run to
// chaos_plain_runs on its own, outside the fence (see plain.go).
type queueWorkload struct{}

// item is the queue workload's job: the seq-th job of its key.
type item struct {
	Seq int `json:"seq"`
}

// Kind names the job kind.
func (item) Kind() string { return "chaos.apply" }

func (queueWorkload) Name() string { return "queue" }

func (queueWorkload) Setup(ctx context.Context, db *pgxpool.Pool, env *Env) error {
	q, err := render(env.Schema)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, q.ledger); err != nil {
		return fmt.Errorf("chaos: ledger: %w", err)
	}
	if _, err := db.Exec(ctx, q.plainLedger); err != nil {
		return fmt.Errorf("chaos: plain runs: %w", err)
	}
	if _, err := db.Exec(ctx, q.group, env.Group, env.Partitions); err != nil {
		return fmt.Errorf("chaos: group: %w", err)
	}
	return nil
}

// feedTick is how often the feeder enqueues a batch.
const feedTick = 100 * time.Millisecond

func (queueWorkload) Feed(ctx context.Context, db *pgxpool.Pool, env Env, n int, d time.Duration) ([]int64, error) {
	c, err := newQueueClient(db, env)
	if err != nil {
		return nil, err
	}
	ticks := max(1, int(d/feedTick))
	seq := make([]int, env.Keys)
	var ids []int64
	start := time.Now()
	for t, sent := 0, 0; sent < n; t++ {
		want := min(n, (t+1)*n/ticks+1)
		var batch []queue.Job
		for ; sent < want; sent++ {
			k := sent % env.Keys
			var args queue.Args = item{Seq: seq[k]}
			if plainKey(env, k) {
				args = plainItem{Seq: seq[k]}
			}
			batch = append(batch, queue.Job{Group: env.Group, Key: fmt.Sprint("k", k), Args: args})
			seq[k]++
		}
		for len(batch) > 0 {
			ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res, err := c.EnqueueMany(ectx, batch...)
			cancel()
			if err == nil {
				for _, r := range res {
					ids = append(ids, r.ID)
				}
				break
			}
			// The outcome is unknown (the database restarts, say): enqueue
			// again. A batch enqueued twice is two sets of jobs, each of
			// which must still be applied once; the checker reads the jobs
			// table.
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

// newQueueClient returns the workload's queue client (the one place it is
// built).
func newQueueClient(db *pgxpool.Pool, env Env) (*queue.Client, error) {
	h, err := handle(db, env.Schema, nil)
	if err != nil {
		return nil, err
	}
	return queue.New(h, queue.Config{MaxAttempts: maxAttempts})
}

// FeedPartitions enqueues a job to a key of each of the partitions given,
// beyond the run's planned items, and returns their ids (a scenario's top
// up of a worker whose partitions ran dry).
func (queueWorkload) FeedPartitions(ctx context.Context, db *pgxpool.Pool, env Env, parts []int) ([]int64, error) {
	c, err := newQueueClient(db, env)
	if err != nil {
		return nil, err
	}
	var jobs []queue.Job
	for _, p := range parts {
		for k := range env.Keys {
			if key := fmt.Sprint("k", k); partition.OfString(key, env.Partitions) == p {
				var args queue.Args = item{Seq: -1}
				if plainKey(env, k) {
					args = plainItem{Seq: -1}
				}
				jobs = append(jobs, queue.Job{Group: env.Group, Key: key, Args: args})
				break
			}
		}
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	res, err := c.EnqueueMany(ctx, jobs...)
	if err != nil {
		return nil, fmt.Errorf("chaos: enqueue: %w", err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids, nil
}

func (queueWorkload) Items(ctx context.Context, db *pgxpool.Pool, env Env) (int, error) {
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var n int
	err = db.QueryRow(ctx, q.items, env.Group).Scan(&n)
	return n, err
}

func (queueWorkload) Outstanding(ctx context.Context, db *pgxpool.Pool, env Env) (int, error) {
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var n int
	err = db.QueryRow(ctx, q.outstanding, env.Group).Scan(&n)
	return n, err
}

func (queueWorkload) Applied(ctx context.Context, db *pgxpool.Pool, env Env) (int64, error) {
	q, err := render(env.Schema)
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.QueryRow(ctx, q.applied).Scan(&n)
	return n, err
}

func (queueWorkload) Collect(ctx context.Context, db *pgxpool.Pool, env Env) (Input, error) {
	q, err := render(env.Schema)
	if err != nil {
		return Input{}, err
	}
	rows, err := db.Query(ctx, q.jobs, env.Group)
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Job])
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read jobs: %w", err)
	}
	rows, err = db.Query(ctx, q.entries)
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read ledger: %w", err)
	}
	ledger, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Entry])
	if err != nil {
		return Input{}, fmt.Errorf("chaos: read ledger: %w", err)
	}
	plain, runs, err := readPlain(ctx, db, q, env.Group)
	if err != nil {
		return Input{}, err
	}
	return Input{Jobs: jobs, Ledger: ledger, Plain: plain, PlainRuns: runs}, nil
}

func (queueWorkload) Close() error { return nil }

func (queueWorkload) Work(ctx context.Context, db *pgxpool.Pool, w WorkerEnv) error {
	q, err := render(w.Schema)
	if err != nil {
		return err
	}
	return runQueue(ctx, db, w, func(ws *queue.Workers) {
		handleEffect(ws, db, w, func(j *queue.Work[item]) (string, []any) {
			return q.apply, []any{j.ID, j.Key, j.Partition, int64(j.Token), w.ID}
		})
		handlePlain(ws, db, w, q)
	})
}

// handleEffect registers the handler of T's kind: a run may stall (past
// the TTL, ignoring its context), then writes its effect, the statement
// and arguments that effect returns, in the job's fenced transaction (or,
// unfenced, on its own autocommit statement: the control), and passes the
// Hold hook.
func handleEffect[T queue.Args](ws *queue.Workers, db *pgxpool.Pool, w WorkerEnv,
	effect func(j *queue.Work[T]) (string, []any)) {
	stall := func() {
		if ok, d := w.Stall(); ok {
			time.Sleep(d) // ignoring the context: a stuck call, a GC pause
		}
	}
	if w.Unfenced {
		// The control: the effect commits on its own, before the job's
		// fenced completion, as in an at-least-once queue.
		queue.Handle(ws, func(ctx context.Context, j *queue.Work[T]) error {
			stall()
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			sql, args := effect(j)
			if _, err := db.Exec(actx, sql, args...); err != nil {
				return err
			}
			hold(w, HandlerRun{Job: j.ID, Partition: j.Partition, Token: int64(j.Token)})
			return nil
		})
		return
	}
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, j *queue.Work[T]) error {
		stall()
		sql, args := effect(j)
		if _, err := tx.Exec(context.WithoutCancel(ctx), sql, args...); err != nil {
			return err
		}
		hold(w, HandlerRun{Job: j.ID, Partition: j.Partition, Token: int64(j.Token)})
		return nil
	})
}

// runQueue runs a worker.Worker whose queue has the handlers register
// registers (with handleEffect), recording each commit
// attempt's outcome, until ctx ends; then it stops the worker gracefully.
func runQueue(ctx context.Context, db *pgxpool.Pool, w WorkerEnv, register func(ws *queue.Workers)) error {
	ws := queue.NewWorkers()
	register(ws)
	ttl := w.Lease.TTL
	if ttl == 0 {
		ttl = lease.DefaultTTL
	}
	cfg := worker.Config{
		Group: w.Group, Partitions: w.Partitions, ID: w.ID, Workers: ws,
		Lease: w.Lease, MembershipPollInterval: 200 * time.Millisecond,
	}
	cfg.Queue.PollInterval = 100 * time.Millisecond
	cfg.Queue.MinRetry, cfg.Queue.MaxRetry = 100*time.Millisecond, 2*time.Second
	// A stalled or paused handler's transaction stays open past the TTL:
	// keep it open so that its commit reaches the fence check.
	cfg.Queue.Fence = lease.FenceConfig{IdleTimeout: 4 * ttl}
	cfg.Queue.Hooks.OnJob = func(e queue.JobEvent) {
		// The run's own token: two runs of one job may overlap in one
		// process (a stalled run of an earlier grant and the next
		// grant's), so it cannot be looked up by job id (a map by job id
		// once gave a refused run the token of the run that committed).
		ev := Event{Type: EventCommit, Partition: e.Partition, Job: e.ID, Token: int64(e.Token), Outcome: string(e.Outcome)}
		if e.Err != nil {
			ev.Err = e.Err.Error()
		}
		w.Recorder.Record(ev)
	}
	h, err := workerHandle(db, w)
	if err != nil {
		return err
	}
	wk, err := worker.New(h, cfg)
	if err != nil {
		return err
	}
	if err := wk.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*ttl+2*time.Second)
	defer cancel()
	return wk.Stop(sctx)
}

// hold passes a handler run to w's Hold hook, if it has one.
func hold(w WorkerEnv, r HandlerRun) {
	if w.Hold != nil {
		w.Hold(r)
	}
}
