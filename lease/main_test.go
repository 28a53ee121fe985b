package lease_test

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

// newClient returns a Client on pool with test-friendly defaults (TTL 2s,
// logs discarded), closed when the test ends.
func newClient(t testing.TB, pool *pgxpool.Pool, cfg lease.Config) *lease.Client {
	t.Helper()
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	c, err := lease.New(pgtest.Open(t, pool, leasehold.Config{}), cfg)
	if err != nil {
		t.Fatalf("lease.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}
