package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/internal/store"
)

// EnvURL names the variable that points tests at an existing server. Its
// role must be allowed to create databases.
const EnvURL = "LEASEHOLD_TEST_DATABASE_URL"

var (
	once     sync.Once
	adminURL string
	cluster  *pgcluster.Cluster
	startErr error

	// The template database MigratedURL clones, made once per test binary.
	tmplOnce sync.Once
	tmplName string
	tmplErr  error
)

// Run runs the tests of m, drops the template database if one was made and
// removes the throwaway cluster, if one was started. Use it as
// os.Exit(pgtest.Run(m)) in TestMain.
func Run(m *testing.M) int {
	code := m.Run()
	dropExamples()
	if tmplName != "" {
		if err := dropDatabase(adminURL, tmplName); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: drop template %s: %v\n", tmplName, err)
		}
	}
	if cluster != nil {
		cluster.Remove()
	}
	return code
}

func server(t testing.TB) string {
	t.Helper()
	u, err := ServerURL()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// ServerURL starts the throwaway cluster once (or takes EnvURL) and
// returns its admin URL.
func ServerURL() (string, error) {
	once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			adminURL = u
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cluster, startErr = pgcluster.Start(ctx, pgcluster.Config{})
		if startErr == nil {
			adminURL = cluster.URL("postgres")
		}
	})
	return adminURL, startErr
}

// URL creates an empty database for this test, dropped when the test ends,
// and returns its connection URL.
func URL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, server(t), "")
}

// newDatabase creates a database for this test, a copy of template (the
// server's default when empty), dropped when the test ends, and returns its
// connection URL.
func newDatabase(t testing.TB, admin, template string) string {
	t.Helper()
	name := randomName("lh_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	sql := "CREATE DATABASE " + name
	if template != "" {
		// The server's default strategy (WAL_LOG on PostgreSQL 15 and
		// later): FILE_COPY was no faster on the throwaway cluster and
		// about twice as slow on a durable server, where its checkpoints
		// are paid for.
		sql += " TEMPLATE " + template
	}
	for attempt := 1; ; attempt++ {
		_, err = conn.Exec(ctx, sql)
		// The server itself waits up to 5s for sessions on the template
		// to end before refusing with 55006: retry a little beyond that.
		if err == nil || !isCode(err, "55006") || attempt == 3 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := dropDatabase(admin, name); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return WithDatabase(admin, name)
}

// dropDatabase drops database name, if it exists, ending its sessions.
func dropDatabase(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

func randomName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// template returns the name of a database holding leasehold's default
// schema, migrated once per test binary, from which MigratedURL clones each
// test's database. No session stays connected to it: CREATE DATABASE
// refuses to copy a database others are connected to.
func template(t testing.TB) string {
	t.Helper()
	admin := server(t)
	tmplOnce.Do(func() {
		name := randomName("lh_tmpl_")
		if tmplErr = makeTemplate(admin, name); tmplErr != nil {
			dropDatabase(admin, name)
			return
		}
		tmplName = name
	})
	if tmplErr != nil {
		t.Fatalf("pgtest: template database: %v", tmplErr)
	}
	return tmplName
}

func makeTemplate(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	tc, err := pgx.Connect(ctx, WithDatabase(admin, name))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	_, err = store.Apply(ctx, tc, "")
	tc.Close(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Refuse new sessions, and wait for the migration's to have ended.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("alter database: %w", err)
	}
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, name).Scan(&n); err != nil {
			return fmt.Errorf("sessions: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d sessions still on the template: %w", n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WithDatabase returns connURL with its database replaced by name.
func WithDatabase(connURL, name string) string {
	if strings.HasPrefix(connURL, "postgres://") || strings.HasPrefix(connURL, "postgresql://") {
		u, err := url.Parse(connURL)
		if err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	return connURL + " dbname=" + name
}

// Pool creates a database for this test with leasehold's schema migrated
// (see MigratedURL) and returns a pool on it, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolURL(t, MigratedURL(t))
}

// MigratedURL is URL with leasehold's default schema already migrated: the
// database is a copy of a template migrated once per test binary.
func MigratedURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, server(t), template(t))
}

// PoolURL opens a pool on connURL, closed when the test ends.
func PoolURL(t testing.TB, connURL string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := pgxpool.New(ctx, connURL)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("pgtest: ping: %v", err)
	}
	t.Cleanup(func() {
		// Close waits for every acquired connection. One a failed test left
		// in use (an open transaction) would hang the whole test binary
		// until its timeout: report it instead.
		closed := make(chan struct{})
		go func() {
			p.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			t.Errorf("pgtest: the pool did not close within 30s: a connection is still in use (an open transaction, or rows not closed)")
		}
	})
	return p
}

// Cluster starts a dedicated throwaway cluster for one test (for tests that
// stop and restart the server) and removes it when the test ends. The test is
// skipped when the PostgreSQL binaries are not installed and a server URL is
// configured instead.
func Cluster(t testing.TB) *pgcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{})
	if err != nil {
		if os.Getenv(EnvURL) != "" {
			t.Skipf("pgtest: no local PostgreSQL binaries for a dedicated cluster: %v", err)
		}
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { c.Remove() })
	return c
}

// Must fails the test on err; a shorthand for setup steps.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Sprint(err))
	}
}
