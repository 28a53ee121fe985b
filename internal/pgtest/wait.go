package pgtest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WaitNoPendingJobs waits until no job of leasehold's default schema is
// pending in the database of pool, and fails the test after within.
func WaitNoPendingJobs(t testing.TB, pool *pgxpool.Pool, within time.Duration) {
	t.Helper()
	ctx := Context(t)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var pending int
		Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'pending'`).Scan(&pending))
		if pending == 0 {
			return
		}
		if time.Since(start) > within {
			t.Fatalf("%d jobs still pending after %v", pending, within)
		}
	}
}
