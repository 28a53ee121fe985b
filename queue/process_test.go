package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

var quiet = slog.New(slog.DiscardHandler)

// startWorker starts a partition member of group "emails" whose Run is a
// Processor with ws.
func startWorker(t *testing.T, pool *pgxpool.Pool, id string, ws *queue.Workers, clock lease.Clock) *partition.Member {
	return workerLog(t, pool, id, ws, clock, quiet)
}

func workerLog(t *testing.T, pool *pgxpool.Pool, id string, ws *queue.Workers, clock lease.Clock, log *slog.Logger) *partition.Member {
	return workerFence(t, pool, id, ws, clock, log, lease.FenceConfig{})
}

// workerFence is workerLog whose effect transactions have the timeouts of fc.
func workerFence(t *testing.T, pool *pgxpool.Pool, id string, ws *queue.Workers, clock lease.Clock, log *slog.Logger, fc lease.FenceConfig) *partition.Member {
	t.Helper()
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: log}), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: 20 * time.Millisecond, MaxRetry: 50 * time.Millisecond, StopGrace: 200 * time.Millisecond, Fence: fc})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, ID: id, Run: p.Run,
		PollInterval: 100 * time.Millisecond,
		Lease:        lease.Config{TTL: time.Second, Clock: clock}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(pgtest.Context(t)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	return m
}

func ledgerSetup(t *testing.T, pool *pgxpool.Pool) {
	_, err := pool.Exec(pgtest.Context(t), `CREATE TABLE ledger (n bigserial PRIMARY KEY, job_id bigint NOT NULL, key text, seq int, token bigint)`)
	pgtest.Must(t, err)
}

type deposit struct {
	Seq int `json:"seq"`
}

func (deposit) Kind() string { return "deposit" }

func record(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
	_, err := tx.Exec(ctx, `INSERT INTO ledger (job_id, key, seq, token) VALUES ($1, $2, $3, $4)`,
		w.ID, w.Key, w.Args.Seq, int64(w.Token))
	return err
}

// Two members share the partitions; a transactional handler writes one
// ledger row per job: every job applies exactly once, and jobs of a key in
// the order they were enqueued.
func TestTransactionalJobsApplyOnceInKeyOrder(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, record)
	startWorker(t, pool, "w1", ws, nil)
	startWorker(t, pool, "w2", ws, nil)
	var jobs []queue.Job
	for i := range 300 {
		jobs = append(jobs, queue.Job{Group: "emails", Key: fmt.Sprintf("acct-%d", i%17), Args: deposit{Seq: i}})
	}
	_, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)

	var rows, distinct int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT job_id) FROM ledger`).Scan(&rows, &distinct))
	if rows != 300 || distinct != 300 {
		t.Fatalf("ledger has %d rows for %d jobs; want 300 for 300", rows, distinct)
	}
	var disorder int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger a JOIN ledger b ON a.key = b.key AND a.n < b.n AND a.seq > b.seq`).Scan(&disorder))
	if disorder != 0 {
		t.Fatalf("%d pairs of same-key jobs applied out of enqueue order", disorder)
	}
}

// The stale owner: A's handler ignores its context and stalls past the
// lease TTL (A is paused: its clock stands still, so it neither renews nor
// notices). B takes over and completes the job. When A resumes, its effect
// transaction is refused with ErrFenced: the ledger holds one row.
func TestStaleOwnerIsFenced(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var aLog logtest.Buffer
	wsA := queue.NewWorkers()
	queue.HandleTx(wsA, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if err := record(ctx, tx, w); err != nil {
			return err
		}
		once.Do(func() { close(stalled) })
		<-resume // ignores ctx: the classic zombie
		return nil
	})
	aClock := fakeclock.New(time.Now())
	a := workerLog(t, pool, "a", wsA, aClock, slog.New(slog.NewTextHandler(&aLog, nil)))
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "acct-1", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	tickUntil(t, aClock, stalled)
	aToken := a.Owned()
	wsB := queue.NewWorkers()
	queue.HandleTx(wsB, record)
	startWorker(t, pool, "b", wsB, nil) // takes over once a's lease expires in the database
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	close(resume) // a resumes and tries to commit

	// a's commit is refused with ErrFenced (the processor logs it and
	// returns from Run).
	for start := time.Now(); !strings.Contains(aLog.String(), "queue: fenced"); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the stale owner was not fenced; its log:\n%s", aLog.String())
		}
	}
	if !strings.Contains(aLog.String(), "granted anew") {
		t.Fatalf("a was refused for another reason:\n%s", aLog.String())
	}
	var rows int
	var token int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), max(token) FROM ledger`).Scan(&rows, &token))
	if rows != 1 {
		t.Fatalf("ledger has %d rows for one job; want exactly 1 (a stale owner committed)", rows)
	}
	for _, o := range aToken {
		if fence.Token(token) == o.Token {
			t.Fatalf("the row was written with a's token %v; want b's", o.Token)
		}
	}
	var state string
	var attempt int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT state, attempt FROM leasehold.jobs`).Scan(&state, &attempt))
	if state != "completed" || attempt != 1 {
		t.Fatalf("job %s after %d attempts; want completed once", state, attempt)
	}
}

// tickUntil runs clk at about real speed until done is closed, then leaves
// it stopped. A zombie's clock must stop only once its handler stalls: a
// failed first claim (a statement timeout on a loaded machine) is retried
// after a backoff on that clock, which a clock frozen from the start never
// ends. Once stopped, the zombie renews nothing and its lease expires in the
// database.
func tickUntil(t *testing.T, clk *fakeclock.Clock, done <-chan struct{}) {
	t.Helper()
	ctx := pgtest.Context(t)
	for {
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
			clk.Advance(20 * time.Millisecond)
		case <-ctx.Done():
			t.Fatal("the handler never ran")
		}
	}
}

// A fence check with the stale token, done the way the processor does it,
// is refused with ErrFenced (the error a's commit got above).
func TestStaleTokenCheckIsErrFenced(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	f, err := lease.NewFence(pgtest.DBOn(t, pool), lease.FenceConfig{})
	pgtest.Must(t, err)
	la, err := func() (*lease.Lease, error) {
		c, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: "a", TTL: time.Second, Clock: fakeclock.New(time.Now())})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c.TryAcquire(ctx, "partition/emails/0")
	}()
	pgtest.Must(t, err)
	b, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: "b", TTL: time.Second})
	pgtest.Must(t, err)
	t.Cleanup(func() { b.Close(context.Background()) })
	if _, err := b.Acquire(ctx, "partition/emails/0"); err != nil {
		t.Fatal(err)
	}
	err = f.Tx(ctx, "partition/emails/0", la.Token(), func(pgx.Tx) error { return nil })
	if !errors.Is(err, fence.ErrFenced) || !strings.Contains(err.Error(), "granted anew") {
		t.Fatalf("stale check = %v; want ErrFenced", err)
	}
}

// The stale owner with a plain handler: its (external) effect may run on
// both owners, but the job is completed once, by the new owner; the stale
// owner's completion is refused with ErrFenced.
func TestStaleOwnersPlainCompletionIsFenced(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var aLog logtest.Buffer
	wsA := queue.NewWorkers()
	queue.Handle(wsA, func(ctx context.Context, w *queue.Work[deposit]) error {
		once.Do(func() { close(stalled) })
		<-resume // ignores ctx
		return nil
	})
	aClock := fakeclock.New(time.Now())
	workerLog(t, pool, "a", wsA, aClock, slog.New(slog.NewTextHandler(&aLog, nil)))
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "acct-1", Args: deposit{Seq: 1}})
	pgtest.Must(t, err)
	tickUntil(t, aClock, stalled)
	wsB := queue.NewWorkers()
	queue.Handle(wsB, func(ctx context.Context, w *queue.Work[deposit]) error { return nil })
	b := startWorker(t, pool, "b", wsB, nil)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	close(resume)
	for start := time.Now(); !strings.Contains(aLog.String(), "queue: fenced"); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the stale owner's completion was not fenced; its log:\n%s", aLog.String())
		}
	}
	var attempt int
	var token int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT attempt, finished_token FROM leasehold.jobs`).Scan(&attempt, &token))
	owned := b.Owned()
	var bTokens []fence.Token
	for _, o := range owned {
		bTokens = append(bTokens, o.Token)
	}
	if attempt != 1 || !slices.Contains(bTokens, fence.Token(token)) {
		t.Fatalf("job completed with attempt %d by token %d; want once, by b (tokens %v)", attempt, token, bTokens)
	}
}

// The batch form: the due jobs of a kind in one fetch run in one
// transaction; each applies exactly once; a failed batch rolls back whole
// and is retried.
func TestBatchTransactionalHandler(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	var mu sync.Mutex
	var sizes []int
	failedOnce := false
	ws := queue.NewWorkers()
	queue.HandleTxBatch(ws, func(ctx context.Context, tx pgx.Tx, works []*queue.Work[deposit]) error {
		for _, w := range works {
			if err := record(ctx, tx, w); err != nil {
				return err
			}
		}
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(works))
		if !failedOnce && len(works) > 1 {
			failedOnce = true
			return errors.New("the whole batch fails once")
		}
		return nil
	})
	var jobs []queue.Job
	for i := range 200 {
		jobs = append(jobs, queue.Job{Group: "emails", Key: fmt.Sprintf("acct-%d", i), Args: deposit{Seq: i}})
	}
	_, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	var rows, distinct, retried int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT job_id) FROM ledger`).Scan(&rows, &distinct))
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE attempt = 2 AND jsonb_array_length(errors) = 1`).Scan(&retried))
	mu.Lock()
	defer mu.Unlock()
	if rows != 200 || distinct != 200 {
		t.Fatalf("ledger has %d rows for %d jobs; want 200 for 200 (the failed batch's rows rolled back)", rows, distinct)
	}
	if retried == 0 || !slices.ContainsFunc(sizes, func(n int) bool { return n > 1 }) {
		t.Fatalf("batch sizes %v, %d jobs retried after the failed batch; want batches of several and a retried batch", sizes, retried)
	}
}

// A stale owner's batch in which one transactional job committed before the
// lease was lost and the next one was fenced: OnJob reports the first as
// completed (it was: its row is in the ledger) and only the second as
// fenced; the stale owner runs no further job of the batch.
func TestFencedBatchReportsCommittedJobsAsCompleted(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	ledgerSetup(t, pool)
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		if k := fmt.Sprint("acct-", i); partition.OfString(k, 8) == 0 {
			keys = append(keys, k)
		}
	}
	res, err := c.EnqueueMany(ctx, queue.Job{Group: "emails", Key: keys[0], Args: deposit{Seq: 1}},
		queue.Job{Group: "emails", Key: keys[1], Args: deposit{Seq: 2}},
		queue.Job{Group: "emails", Key: keys[2], Args: deposit{Seq: 3}})
	pgtest.Must(t, err)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var aRan sync.Map
	wsA := queue.NewWorkers()
	queue.HandleTx(wsA, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		aRan.Store(w.Args.Seq, true)
		if err := record(ctx, tx, w); err != nil {
			return err
		}
		if w.Args.Seq == 2 {
			close(stalled)
			<-resume // ignores ctx: a zombie
		}
		return nil
	})
	var mu sync.Mutex
	outcomes := map[int64]queue.Outcome{}
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: wsA, PollInterval: 20 * time.Millisecond,
		PartitionConcurrency: 1, // job 3 can only start after job 2's commit was fenced
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[e.ID] = e.Outcome
		}}})
	pgtest.Must(t, err)
	// A's clock runs until job 2 stalls (tickUntil; a clock stopped from
	// the start left A waiting for ever after one timed-out claim, in CI).
	clock := fakeclock.New(time.Now())
	a, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "emails", Partitions: 8, ID: "a", Run: p.Run,
		PollInterval: 100 * time.Millisecond,
		Lease:        lease.Config{TTL: time.Second, Clock: clock}})
	pgtest.Must(t, err)
	pgtest.Must(t, a.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Stop(sctx)
	})
	tickUntil(t, clock, stalled)
	wsB := queue.NewWorkers()
	queue.HandleTx(wsB, record)
	startWorker(t, pool, "b", wsB, nil)
	pgtest.WaitNoPendingJobs(t, pool, 20*time.Second)
	close(resume)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(outcomes)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d of 2 outcomes reported", n)
		}
	}
	time.Sleep(200 * time.Millisecond) // a third run, if any, would be reported by now
	mu.Lock()
	defer mu.Unlock()
	if _, ran := aRan.Load(3); ran {
		t.Errorf("the stale owner ran the batch's next job after its commit was fenced (outcome %q)", outcomes[res[2].ID])
	}
	if o := outcomes[res[0].ID]; o != queue.OutcomeCompleted {
		t.Errorf("the job committed before the loss is reported %q; want completed", o)
	}
	if o := outcomes[res[1].ID]; o != queue.OutcomeFenced {
		t.Errorf("the zombie's job is reported %q; want fenced", o)
	}
	var rows int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&rows))
	if rows != 3 {
		t.Errorf("ledger has %d rows; want one per job", rows)
	}
}

// keysIn returns n distinct keys of partition p (of the 8 of "emails").
func keysIn(p, n int, prefix string) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprintf("%s-%d", prefix, i); partition.OfString(k, 8) == p {
			keys = append(keys, k)
		}
	}
	return keys
}
