package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/store"
)

var (
	// ErrInvalidConfig is wrapped by the errors of Open.
	ErrInvalidConfig = errors.New("leasehold: invalid config")
	// ErrClosed means a component, or the pool it runs on, was closed.
	ErrClosed = store.ErrClosed
	// ErrNotMigrated means leasehold's tables are missing from the schema:
	// every component returns an error wrapping it then.
	ErrNotMigrated = store.ErrNotMigrated
	// ErrSchemaTooNew is returned (wrapped in a *SchemaVersionError) when
	// the database schema is newer than this build of leasehold knows.
	ErrSchemaTooNew = store.ErrSchemaTooNew
	// ErrInvalidSchema is wrapped by the error of Open for a schema name
	// that is not a plain identifier.
	ErrInvalidSchema = store.ErrInvalidSchema
)

// ErrNotReplicated is wrapped (in a *NotReplicatedError, inside a
// *fence.IndeterminateError) by the error of a lease grant or a fenced
// commit (lease.Fence.Tx, a queue completion, a Kafka offset commit) that
// the server committed locally but whose wait for the synchronous standby
// was cancelled: the server answered success with a warning, and a
// failover may lose the commit. Its outcome is unknown, not a success. It
// is detected on leasehold's own pools, and on the pool given to Open when
// its configuration went through InstallNoticeHook. See
// docs/reliability.md.
var ErrNotReplicated = store.ErrNotReplicated

// NotReplicatedError carries the server's warning of an ErrNotReplicated
// commit.
type NotReplicatedError = store.NotReplicatedError

// InstallNoticeHook installs leasehold's notice handler in cfg, in front of
// the handler cfg has (which still receives every notice). It recognises
// the server's warning that a commit was not confirmed by the synchronous
// standby (ErrNotReplicated). Call it on the configuration of the pool you
// give to Open, before pgxpool.NewWithConfig, when the database uses
// synchronous replication: the fenced commits of lease.Fence, the queue and
// the Kafka consumer run on that pool. (The lease client and the partition
// member derive their own pools from it, with the handler installed.)
func InstallNoticeHook(cfg *pgxpool.Config) {
	if cfg == nil || cfg.ConnConfig == nil {
		return
	}
	cfg.ConnConfig.OnNotice = store.NoticeHook(cfg.ConnConfig.OnNotice)
}

// SchemaVersionError reports a database schema version this build cannot
// use.
type SchemaVersionError = store.VersionError

// Config configures a DB: what every component shares. The zero value of
// every field means its default.
type Config struct {
	// Schema is the PostgreSQL schema holding leasehold's tables. It must
	// be a plain identifier (letters, digits, underscores; at most 63
	// bytes). Defaults to "leasehold".
	Schema string
	// Logger receives the structured logs of every component built on the
	// DB, each adding its own attributes (lease, group, partition, token
	// ...). Defaults to slog.Default().
	Logger *slog.Logger
	// TransactionPooling says that the pool connects through a pooler in
	// transaction mode (PgBouncer's pool_mode = transaction, and the
	// like), where nothing a session holds outlives a transaction. Then
	// leasehold keeps nothing in sessions: the pools it derives from the
	// pool send no session settings (their server-side timeouts become
	// the statements' context deadlines alone), and it LISTENs only on
	// ListenURL, or not at all. The pool must not use named prepared
	// statements (pgx's default, QueryExecModeCacheStatement: set
	// default_query_exec_mode=exec in its URL): Open refuses it. Defaults
	// to false: a direct connection, or a pooler in session mode. See
	// docs/worker.md, "Behind PgBouncer".
	TransactionPooling bool
	// ListenURL is a connection string to PostgreSQL itself, not through a
	// transaction pooler, for the one session per process that LISTENs
	// for notifications (new jobs, pauses, cancellations, membership
	// changes). Defaults to empty: a connection taken from the pool, or,
	// with TransactionPooling, no LISTEN at all: workers then find new
	// jobs, pauses, cancellations and membership changes by polling
	// (queue.Config.PollInterval, worker.Config.MembershipPollInterval),
	// which adds up to that much latency to each.
	ListenURL string
}

// DB is leasehold's handle on one database and schema, shared by every
// component: lease.New, partition.New, queue.New, queue.NewProcessor,
// kafka.New and worker.New take it. It holds the application's pool (the
// lease client and the partition member derive small pools of their own
// from its configuration, so that renewals and heartbeats never wait behind
// application queries), the schema and the logger. A DB is safe for
// concurrent use. Create it with Open: every component refuses a nil or
// zero DB with an ErrInvalidConfig error.
type DB struct {
	pool      *pgxpool.Pool
	schema    string
	log       *slog.Logger
	txPooling bool
	listen    *pgx.ConnConfig // nil: none given
	// listenPool is the pool whose connection LISTENs when listen is nil:
	// pool, or the pool of the DB that WithPool was called on.
	listenPool *pgxpool.Pool
}

// Open returns a DB on pool, with cfg validated. It does no I/O: call
// Migrate to create or upgrade the schema.
func Open(pool *pgxpool.Pool, cfg Config) (*DB, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidConfig)
	}
	st, err := store.For(cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: Schema: %w", ErrInvalidConfig, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	db := &DB{pool: pool, schema: st.Schema, log: cfg.Logger, txPooling: cfg.TransactionPooling, listenPool: pool}
	if err := checkPooling(cfg.TransactionPooling, pool); err != nil {
		return nil, err
	}
	if cfg.ListenURL != "" {
		cc, err := pgx.ParseConfig(cfg.ListenURL)
		if err != nil {
			return nil, fmt.Errorf("%w: ListenURL: %w", ErrInvalidConfig, err)
		}
		db.listen = cc
	} else if cfg.TransactionPooling {
		db.log.Info("leasehold: transaction pooling without a ListenURL: no LISTEN; "+
			"workers find new jobs and membership changes by polling", "schema", db.schema)
	}
	return db, nil
}

// checkPooling refuses, behind a transaction pooler (txPooling), a pool
// that prepares named statements.
func checkPooling(txPooling bool, pool *pgxpool.Pool) error {
	if txPooling && pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		return fmt.Errorf("%w: TransactionPooling: the pool prepares named statements, which a pooler in "+
			"transaction mode cannot carry from one transaction to the next: set default_query_exec_mode=exec "+
			"in its URL (or ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec)", ErrInvalidConfig)
	}
	return nil
}

// Pool returns the pool the DB was opened on; nil for a nil or zero DB,
// which every component refuses (a DB must come from Open).
func (db *DB) Pool() *pgxpool.Pool {
	if db == nil {
		return nil
	}
	return db.pool
}

// WithPool returns a DB like db (its schema, logger and Config) on pool,
// which must reach the same database (through the same pooler, if any),
// whose components share db's listening session: a process still LISTENs
// on one session per database. A worker runs its queue on such a DB,
// on a pool of its own (see docs/worker.md, "Connections per worker").
func (db *DB) WithPool(pool *pgxpool.Pool) (*DB, error) {
	if db.Pool() == nil {
		return nil, errNotOpen
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidConfig)
	}
	if err := checkPooling(db.txPooling, pool); err != nil {
		return nil, err
	}
	c := *db
	c.pool = pool
	return &c, nil
}

// TransactionPooling reports Config.TransactionPooling.
func (db *DB) TransactionPooling() bool { return db.txPooling }

// Listen returns where the components built on the DB LISTEN: the session
// of Config.ListenURL, a connection of the pool, or none (with
// TransactionPooling and no ListenURL).
func (db *DB) Listen() store.Session {
	return store.Session{Pool: db.listenPool, Direct: db.listen, Off: db.txPooling && db.listen == nil}
}

// Schema returns the schema's name.
func (db *DB) Schema() string { return db.schema }

// Logger returns the logger of every component built on the DB.
func (db *DB) Logger() *slog.Logger { return db.log }

// errNotOpen is the error of a DB method on a DB that Open did not return.
var errNotOpen = fmt.Errorf("%w: a DB must come from Open", ErrInvalidConfig)

// Migrate creates or upgrades leasehold's schema to the version this build
// knows. It is safe to call from several processes at once: they serialise
// on an advisory lock and all but the first find nothing to do. A database
// whose schema is newer than this build gives a *SchemaVersionError.
//
// Migrate then runs the token regression guard: if the fencing token
// sequence is behind a token stored in leasehold's tables (the lease rows,
// queue runs, Kafka offsets, finished jobs; say, after a restore), it moves
// the sequence past it and logs a warning, so that no later grant carries
// a token those tables refuse. This scans the jobs table. Every lease
// client runs the same guard (without the jobs scan) before its first
// grant; see docs/reliability.md.
func (db *DB) Migrate(ctx context.Context) error {
	if db.Pool() == nil {
		return errNotOpen
	}
	applied, err := store.Apply(ctx, db.pool, db.schema)
	if err != nil {
		return err
	}
	for _, v := range applied {
		db.log.InfoContext(ctx, "leasehold: schema migrated", "schema", db.schema, "version", v)
	}
	st, err := store.For(db.schema)
	if err != nil {
		return err
	}
	raise, err := store.GuardTokens(ctx, db.pool, st, 0, true)
	if err != nil {
		return err
	}
	if raise != nil {
		db.log.WarnContext(ctx, "leasehold: the token sequence was behind stored tokens; moved it forward",
			"schema", db.schema, "issued", raise.Issued, "stored", raise.Stored, "next_token", raise.Stored+1)
	}
	return nil
}

// SchemaVersion returns the version of leasehold's schema in the database,
// 0 when it has not been migrated.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	if db.Pool() == nil {
		return 0, errNotOpen
	}
	return store.Version(ctx, db.pool, db.schema)
}

// LatestSchemaVersion returns the newest schema version this build knows.
func LatestSchemaVersion() int { return store.Latest() }
