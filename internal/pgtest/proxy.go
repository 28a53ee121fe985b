package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/netproxy"
)

// ProxiedPool opens a pool on connURL whose connections go through a fault
// proxy (internal/netproxy), and returns it with the proxy; both are closed
// when the test ends. opts adjust the pool's configuration before it opens
// (a connect timeout, say).
func ProxiedPool(t testing.TB, connURL string, opts ...func(*pgxpool.Config)) (*pgxpool.Pool, *netproxy.Proxy) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(connURL)
	Must(t, err)
	for _, o := range opts {
		o(cfg)
	}
	proxy, err := netproxy.Start(fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	Must(t, err)
	t.Cleanup(func() { proxy.Close() })
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(proxy.Port())
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	Must(t, err)
	t.Cleanup(pool.Close)
	return pool, proxy
}
