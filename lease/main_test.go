package lease_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/netproxy"
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

// proxiedPool returns a pool on url whose connections pass through a TCP
// fault proxy, and the proxy; both are closed when the test ends.
func proxiedPool(t *testing.T, url string, opts ...func(*pgxpool.Config)) (*pgxpool.Pool, *netproxy.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	pgtest.Must(t, err)
	for _, o := range opts {
		o(cfg)
	}
	proxy, err := netproxy.Start(fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	pgtest.Must(t, err)
	t.Cleanup(func() { proxy.Close() })
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	return pool, proxy
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
