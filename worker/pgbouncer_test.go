package worker_test

import (
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// The fleet scenario (fleetScenario: three workers, a graceful leave and
// a join, every job exactly once in key order, the lease history checked)
// behind PgBouncer in transaction pooling mode, with LISTEN on a direct
// session (ListenURL) and without (polling only). Before TransactionPooling,
// the member's own pool could not connect through the pooler (PgBouncer
// refuses its session settings), and the pool's prepared statements failed
// on the next server connection.
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
			cfg := leasehold.Config{TransactionPooling: true}
			if c.listen {
				cfg.ListenURL = direct
			}
			fleetScenario(t, pgtest.Open(t, pgtest.PoolURL(t, bounced), cfg), admin)
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
