package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// A network stall between a transactional run's completion and its COMMIT
// (the server ends the session at the fence's idle-in-transaction timeout,
// and the client reads that FATAL answer to its COMMIT) leaves the COMMIT's
// outcome unknown: it is the processor's failure, not the handler's. The
// job spends no attempt and records no error; it runs again under the
// fence and completes on its first charged attempt. The processor's
// connections go through a fault proxy; the member's lease and the test's
// reads do not.
func TestStallAtCommitIsNotChargedToTheHandler(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	direct := pgtest.PoolURL(t, url)
	_, err := direct.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('emails', 8)`)
	pgtest.Must(t, err)
	ledgerSetup(t, direct)
	c, err := queue.New(pgtest.DBOn(t, direct), queue.Config{})
	pgtest.Must(t, err)
	proxied, proxy := pgtest.ProxiedPool(t, url, func(c *pgxpool.Config) { c.ConnConfig.ConnectTimeout = time.Second })

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		if err := record(ctx, tx, w); err != nil {
			return err
		}
		once.Do(func() {
			close(entered)
			<-release
		})
		return nil
	})
	var mu sync.Mutex
	var evs []queue.JobEvent
	p, err := queue.NewProcessor(pgtest.DBOn(t, proxied), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: time.Millisecond,
		// The completion waits for the lease row the test holds: its
		// statement must not time out (StatementTimeout defaults to
		// IdleTimeout) before the test blackholes the proxy, which a loaded
		// machine can delay past 300ms; the idle timeout then ends the
		// stalled session.
		Fence: lease.FenceConfig{IdleTimeout: 300 * time.Millisecond, LockTimeout: 20 * time.Second, StatementTimeout: 20 * time.Second},
		Hooks: queue.Hooks{OnJob: func(e queue.JobEvent) {
			mu.Lock()
			defer mu.Unlock()
			evs = append(evs, e)
		}}})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, direct), partition.Config{Group: "emails", Partitions: 8, Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: 5 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Stop(sctx)
	})

	key := "acct-1"
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: key, Args: deposit{Seq: 1}, MaxAttempts: 5})
	pgtest.Must(t, err)
	<-entered
	// Hold the partition's lease row, so that the run's completion (which
	// locks it FOR KEY SHARE, which the FOR UPDATE held here blocks) waits, on
	// the server, once the handler returns.
	hold, err := direct.Begin(ctx)
	pgtest.Must(t, err)
	defer hold.Rollback(context.Background())
	var holder int
	pgtest.Must(t, hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder))
	_, err = hold.Exec(ctx, `SELECT FROM leasehold.leases WHERE name = $1 FOR UPDATE`, partition.LeaseName("emails", partition.OfString(key, 8)))
	pgtest.Must(t, err)
	close(release)
	var victim int
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		err := direct.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE $1::int = ANY(pg_blocking_pids(pid)) AND query LIKE '%FOR KEY SHARE OF l%'`, holder).Scan(&victim)
		if err == nil {
			break
		}
		if err != pgx.ErrNoRows || time.Since(start) > 20*time.Second {
			t.Fatalf("the run's completion never waited for the lease row: %v", err)
		}
	}
	// The stall: the completion's answer, and then the COMMIT, are held
	// while the server's session sits idle in its transaction, until the
	// idle timeout ends it.
	proxy.Blackhole()
	pgtest.Must(t, hold.Commit(ctx))
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var alive bool
		pgtest.Must(t, direct.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)`, victim).Scan(&alive))
		if !alive {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the stalled session was never ended by the idle timeout")
		}
	}
	proxy.Heal()
	pgtest.WaitNoPendingJobs(t, direct, 30*time.Second)

	info, err := c.JobInfo(ctx, res.ID)
	pgtest.Must(t, err)
	var applied int
	pgtest.Must(t, direct.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&applied))
	// The completion's event is reported just after its commit.
	waitUntil(t, "two events", func() bool { mu.Lock(); defer mu.Unlock(); return len(evs) >= 2 })
	mu.Lock()
	defer mu.Unlock()
	if info.State != "completed" || info.Attempt != 1 || len(info.Errors) != 0 || applied != 1 {
		t.Fatalf("job %s after %d attempts, errors %+v, %d effects applied; want completed on attempt 1, no error, applied once",
			info.State, info.Attempt, info.Errors, applied)
	}
	if len(evs) != 2 || evs[0].Outcome != queue.OutcomeUnrecorded || !fence.IsIndeterminate(evs[0].Err) || evs[1].Outcome != queue.OutcomeCompleted {
		t.Fatalf("events %+v; want the stalled run unrecorded (outcome unknown), then completed", evs)
	}
}
