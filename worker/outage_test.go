package worker_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A worker whose database connection goes silent stops processing when its
// leases can no longer be trusted, reports not ready, and resumes by itself
// when the network heals: every job is applied exactly once.
func TestDatabaseOutageStopsAndResumesProcessing(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	group(t, pool, 8)
	ledgerSetup(t, pool)
	cut, proxy := pgtest.ProxiedPool(t, url, func(c *pgxpool.Config) { c.ConnConfig.ConnectTimeout = time.Second })

	jobs, keys := enqueueDeposits(t, pool, 20, 5)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, record("w"))
	w := start(t, cut, worker.Config{ID: "w", Workers: ws})
	ready := func() int {
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)
	if code := ready(); code != http.StatusOK {
		t.Fatalf("/readyz %d before the outage", code)
	}

	proxy.Blackhole()
	outage := time.Now()
	for len(w.Owned()) > 0 {
		if time.Since(outage) > 10*time.Second {
			t.Fatalf("still owns %d partitions 10s into the outage (TTL 2s)", len(w.Owned()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("gave every partition up %v into the outage", time.Since(outage))
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d during the outage; want 503", code)
	}
	more, moreKeys := enqueueSeqs(t, pool, 20, 5, 10) // through the healthy pool
	for id, d := range more {
		jobs[id], keys[id] = d, moreKeys[id]
	}
	time.Sleep(time.Second)
	var applied int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&applied))
	if applied != 100 {
		t.Fatalf("%d jobs applied during the outage; want the 100 from before", applied)
	}

	proxy.Heal()
	pgtest.WaitNoPendingJobs(t, pool, 60*time.Second)
	t.Logf("caught up %v after healing", time.Since(outage))
	if bad := checkLedger(jobs, keys, readLedger(t, pool)); len(bad) > 0 {
		t.Fatalf("%d violations, first: %v", len(bad), bad[:min(5, len(bad))])
	}
	if code := ready(); code != http.StatusOK {
		t.Errorf("/readyz %d after healing", code)
	}
}
