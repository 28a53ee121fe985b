package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/internal/store"
)

// SyncRep is a throwaway cluster whose commits wait for a synchronous
// standby that never connects ("ghost"): every commit under
// synchronous_commit = on waits until it is cancelled, then commits only
// locally, with the server's warning.
type SyncRep struct {
	*pgcluster.Cluster
	// Local is a connection whose commits do not wait (synchronous_commit
	// = local): to set up and look. leasehold's schema is migrated.
	Local *pgx.Conn
}

// SyncRepCluster starts a SyncRep for one test, removed when it ends.
func SyncRepCluster(t testing.TB) *SyncRep {
	t.Helper()
	ctx := Context(t)
	c, err := pgcluster.Start(ctx, pgcluster.Config{Settings: map[string]string{
		"synchronous_standby_names": "ghost", "synchronous_commit": "on"}})
	if err != nil {
		t.Fatalf("pgtest: start a cluster: %v", err)
	}
	t.Cleanup(func() { c.Remove() })
	s := &SyncRep{Cluster: c}
	local, err := pgx.ConnectConfig(ctx, s.ConnConfig(t, "local"))
	Must(t, err)
	t.Cleanup(func() { local.Close(context.Background()) })
	_, err = store.Apply(ctx, local, "")
	Must(t, err)
	s.Local = local
	return s
}

// ConnConfig returns a connection configuration for the cluster's
// "postgres" database with synchronous_commit set to mode.
func (c *SyncRep) ConnConfig(t testing.TB, mode string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(c.URL("postgres"))
	Must(t, err)
	cfg.RuntimeParams["synchronous_commit"] = mode
	return cfg
}

// Pool opens a pool, closed when the test ends, whose connections have
// the runtime parameters params (synchronous_commit defaults to the
// server's on: commits wait for the standby), and whose cancelled contexts
// send a cancel request (pgx's CancelRequestContextWatcherHandler) rather
// than close the connection, with leasehold's notice hook
// (leasehold.InstallNoticeHook) if hook.
func (c *SyncRep) Pool(t testing.TB, params map[string]string, hook bool) *pgxpool.Pool {
	t.Helper()
	pc, err := pgxpool.ParseConfig(c.URL("postgres"))
	Must(t, err)
	for k, v := range params {
		pc.ConnConfig.RuntimeParams[k] = v
	}
	pc.ConnConfig.BuildContextWatcherHandler = func(pg *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pg, DeadlineDelay: 3 * time.Second}
	}
	if hook {
		leasehold.InstallNoticeHook(pc)
	}
	p, err := pgxpool.NewWithConfig(Context(t), pc)
	Must(t, err)
	t.Cleanup(p.Close)
	return p
}

// CancelWaiters cancels (pg_cancel_backend, as an administrator would),
// until the test ends, every session waiting for the standby: each such
// commit then ends committed only locally, with the server's warning. It
// polls every 20ms on a connection of its own that does not wait.
func (c *SyncRep) CancelWaiters(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(Context(t))
	conn, err := pgx.ConnectConfig(ctx, c.ConnConfig(t, "local"))
	Must(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; conn.Close(context.Background()) })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			conn.Exec(ctx, `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}
