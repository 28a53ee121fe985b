package periodic_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// dummyDB returns a DB on a pool that never connects: for New, which does
// no I/O.
func dummyDB(t *testing.T) *leasehold.DB {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := leasehold.Open(pool, leasehold.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func leaseWithOwner() lease.Config          { return lease.Config{Owner: "me"} }
func leaseTTL(d time.Duration) lease.Config { return lease.Config{TTL: d} }
