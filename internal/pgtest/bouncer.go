package pgtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/pgbouncer"
)

// EnvRequirePgBouncer names the variable that makes a missing pgbouncer
// binary fail the tests that run behind one (.ci/run sets it) instead of
// skipping them.
const EnvRequirePgBouncer = "LEASEHOLD_REQUIRE_PGBOUNCER"

// BouncedURL starts a PgBouncer in transaction pooling mode in front of the
// server of connURL for this test (stopped when it ends) and returns a URL
// of connURL's database through it, with pgx's default_query_exec_mode set
// to exec (no named prepared statements: PgBouncer 1.18 cannot carry them
// in transaction mode). The test is skipped when pgbouncer is not
// installed, unless EnvRequirePgBouncer is set.
func BouncedURL(t testing.TB, connURL string) (string, *pgbouncer.Bouncer) {
	t.Helper()
	cc, err := pgconn.ParseConfig(connURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	b := Bouncer(t, pgbouncer.Config{Server: connURL})
	return b.URL(cc.Database) + "&default_query_exec_mode=exec", b
}

// Bouncer starts a PgBouncer of cfg for this test, removed when it ends.
// The test is skipped when pgbouncer is not installed, unless
// EnvRequirePgBouncer is set.
func Bouncer(t testing.TB, cfg pgbouncer.Config) *pgbouncer.Bouncer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := pgbouncer.Start(ctx, cfg)
	if errors.Is(err, pgbouncer.ErrNotInstalled) && os.Getenv(EnvRequirePgBouncer) == "" {
		t.Skipf("pgtest: %v", err)
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { b.Remove() })
	return b
}
