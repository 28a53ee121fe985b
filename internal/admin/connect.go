package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
)

// ErrNoDatabase is returned by Connect when no database is named.
var ErrNoDatabase = errors.New("no database given: pass --database-url or set DATABASE_URL " +
	"(e.g. postgres://user:password@localhost:5432/dbname)")

// ErrUnreachable is wrapped by the error of a database that cannot be
// reached within the connect timeout.
var ErrUnreachable = errors.New("cannot reach the database")

// ErrRejected is wrapped by the error of a database server that answered
// the connection with an error that trying again does not fix (a database
// that does not exist, a wrong password): Connect reports it at once,
// without waiting for the connect timeout.
var ErrRejected = errors.New("the database server rejected the connection")

// NotMigratedError reports a schema that leasehold's commands cannot work
// on yet: never migrated, or migrated by an older version. It wraps
// leasehold.ErrNotMigrated.
type NotMigratedError struct {
	Schema string
	// Version is the schema's version in the database: 0 if never
	// migrated.
	Version int
	// Latest is the version this build needs.
	Latest int
}

// Error says what to run.
func (e *NotMigratedError) Error() string {
	fix := "run `leasehold migrate` (with the same --database-url and --schema)"
	if e.Version == 0 {
		return fmt.Sprintf("schema %q is not migrated in this database: %s", e.Schema, fix)
	}
	return fmt.Sprintf("schema %q is at version %d, this build of leasehold needs version %d: %s",
		e.Schema, e.Version, e.Latest, fix)
}

// Unwrap returns leasehold.ErrNotMigrated.
func (e *NotMigratedError) Unwrap() error { return leasehold.ErrNotMigrated }

// CheckSchema returns a *NotMigratedError unless db's schema is migrated to
// the version this build knows (or a newer one).
func CheckSchema(ctx context.Context, db *leasehold.DB) error {
	v, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if latest := leasehold.LatestSchemaVersion(); v < latest {
		return &NotMigratedError{Schema: db.Schema(), Version: v, Latest: latest}
	}
	return nil
}

// ConnectConfig says which database Connect opens and how long it waits.
type ConnectConfig struct {
	// URL is the PostgreSQL connection URL; "" is ErrNoDatabase.
	URL string
	// Schema is the schema holding leasehold's tables.
	Schema string
	// ConnectTimeout bounds reaching the database (--connect-timeout).
	ConnectTimeout time.Duration
	// Timeout bounds the command's database work (--timeout).
	Timeout time.Duration
	// Logger is the handle's logger; nil means leasehold's default.
	Logger *slog.Logger
}

// Connect opens a small pool on the database and checks that it answers
// within cfg.ConnectTimeout. It returns leasehold's handle on it, for
// cfg.Schema, and a context bounded by cfg.Timeout for the command's
// database work; call the returned function when done.
func Connect(ctx context.Context, cfg ConnectConfig) (*leasehold.DB, context.Context, func(), error) {
	if cfg.URL == "" {
		return nil, nil, nil, ErrNoDatabase
	}
	if _, err := store.Quote(cfg.Schema); err != nil {
		return nil, nil, nil, fmt.Errorf("--schema: %w", err)
	}
	if cfg.ConnectTimeout <= 0 || cfg.Timeout <= 0 {
		return nil, nil, nil, fmt.Errorf("--connect-timeout and --timeout must be positive")
	}
	pool, err := open(ctx, cfg.URL, cfg.ConnectTimeout)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := leasehold.Open(pool, leasehold.Config{Schema: cfg.Schema, Logger: cfg.Logger})
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	wctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout,
		fmt.Errorf("the database work took longer than %v (--timeout)", cfg.Timeout))
	return db, wctx, func() { cancel(); pool.Close() }, nil
}

// open opens a pool of at most 4 connections on url and pings it until it
// answers, for at most timeout. A server that answers with an error (a
// database that does not exist, a wrong password) is reported at once,
// wrapping ErrRejected; a server that cannot be reached (refused, silent,
// unknown host) or answers with a passing condition (starting up, too many
// connections) is tried again until timeout, then reported wrapping
// ErrUnreachable.
func open(ctx context.Context, url string, timeout time.Duration) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = 4, 0
	cfg.ConnConfig.ConnectTimeout = timeout
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "leasehold-cli"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err = pool.Ping(pctx)
		if err == nil {
			return pool, nil
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && !store.Transient(pe) { // trying again will not help
			pool.Close()
			return nil, fmt.Errorf("%w: %v", ErrRejected, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
			continue
		case <-pctx.Done():
			t.Stop()
		}
		pool.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w within %v (--connect-timeout): %v", ErrUnreachable, timeout, err)
	}
}

// Explain makes the error of database work cut short by the context of
// Connect (its Timeout) say so.
func Explain(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			return fmt.Errorf("%v: %w", cause, err)
		}
	}
	return err
}

// Migrate creates or upgrades leasehold's schema and returns its version
// before and after.
func Migrate(ctx context.Context, db *leasehold.DB) (from, to int, err error) {
	if from, err = db.SchemaVersion(ctx); err != nil {
		return 0, 0, err
	}
	if err = db.Migrate(ctx); err != nil {
		return 0, 0, err
	}
	if to, err = db.SchemaVersion(ctx); err != nil {
		return 0, 0, err
	}
	return from, to, nil
}

// dbNow reads the database clock: lease expiries, heartbeats and delays
// count on it, not on this machine's clock.
func dbNow(ctx context.Context, db *leasehold.DB) (time.Time, error) {
	var now time.Time
	err := db.Pool().QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
	return now, err
}
