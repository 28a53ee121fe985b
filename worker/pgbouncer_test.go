package worker_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A fleet behind PgBouncer in transaction pooling mode applies every job
// exactly once in key order, across a graceful leave and a join, with
// LISTEN on a direct session (ListenURL) and without (polling only). The
// lease history holds at most one live owner per partition and strictly
// increasing tokens. Before TransactionPooling, the member's own pool
// could not connect through the pooler (PgBouncer refuses its session
// settings), and the pool's prepared statements failed on the next server
// connection.
func TestFleetBehindPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		listen bool
	}{{"listen on a direct session", true}, {"polling only", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := pgtest.Context(t)
			direct := pgtest.MigratedURL(t)
			bounced, _ := pgtest.BouncedURL(t, direct)
			admin := pgtest.PoolURL(t, direct) // setup and checks, straight to the server
			pool := pgtest.PoolURL(t, bounced)
			cfg := leasehold.Config{TransactionPooling: true}
			if c.listen {
				cfg.ListenURL = direct
			}
			db := pgtest.Open(t, pool, cfg)
			pgtest.Must(t, history.Install(ctx, admin, ""))
			group(t, admin, 16)
			ledgerSetup(t, admin)
			jobs, keys := enqueueDeposits(t, pool, 20, 10)
			handlers := func(name string) *queue.Workers {
				ws := queue.NewWorkers()
				queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
					time.Sleep(time.Millisecond)
					return record(name)(ctx, tx, w)
				})
				return ws
			}
			w1 := startOn(t, db, worker.Config{ID: "w1", Partitions: 16, Workers: handlers("w1")})
			startOn(t, db, worker.Config{ID: "w2", Partitions: 16, Workers: handlers("w2")})
			pgtest.WaitNoPendingJobs(t, admin, 60*time.Second)
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			pgtest.Must(t, w1.Stop(sctx))
			w3 := startOn(t, db, worker.Config{ID: "w3", Partitions: 16, Workers: handlers("w3")})
			for start := time.Now(); len(w3.Owned()) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Since(start) > 30*time.Second {
					t.Fatal("the joining worker owns no partition after 30s")
				}
			}
			more, moreKeys := enqueueSeqs(t, pool, 20, 10, 15)
			maps.Copy(jobs, more)
			maps.Copy(keys, moreKeys)
			pgtest.WaitNoPendingJobs(t, admin, 60*time.Second)

			ledger := readLedger(t, admin)
			if bad := checkLedger(jobs, keys, ledger); len(bad) > 0 {
				t.Fatalf("%d violations, first: %v", len(bad), bad[:min(5, len(bad))])
			}
			by := map[string]int{}
			for _, e := range ledger {
				by[e.workerName]++
			}
			if by["w1"] == 0 || by["w3"] == 0 {
				t.Errorf("rows by worker %v: the leaving and the joining worker should both have run jobs", by)
			}
			vs, err := history.Load(ctx, admin, "")
			pgtest.Must(t, err)
			if r := history.Check(vs); !r.OK() {
				t.Fatalf("lease history: %v", r.Violations)
			}
			// The listening session is the direct one, and only with a
			// ListenURL (the pooler's sessions never LISTEN).
			var listening int
			pgtest.Must(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&listening))
			if want := map[bool]int{true: 1, false: 0}[c.listen]; listening != want {
				t.Errorf("%d sessions LISTEN; want %d", listening, want)
			}
		})
	}
}
