package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
)

// Run runs the tests of m and removes the throwaway cluster, if one was
// started. Use it as os.Exit(pgtest.Run(m)) in TestMain.
func Run(m *testing.M) int {
	code := m.Run()
	dropExamples()
	if cluster != nil {
		cluster.Remove()
	}
	return code
}

func server(t testing.TB) string {
	t.Helper()
	u, err := serverURL()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// serverURL starts the throwaway cluster once (or takes EnvURL) and
// returns its admin URL.
func serverURL() (string, error) {
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
	admin := server(t)
	var b [6]byte
	rand.Read(b[:])
	name := "lh_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return WithDatabase(admin, name)
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

// Pool creates a database for this test, migrates leasehold's schema into it
// and returns a pool on it, closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolURL(t, MigratedURL(t))
}

// MigratedURL is URL with leasehold's schema already migrated.
func MigratedURL(t testing.TB) string {
	t.Helper()
	u := URL(t)
	p := PoolURL(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := store.Apply(ctx, p, ""); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	p.Close()
	return u
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
