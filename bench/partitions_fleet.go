package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/netproxy"
	"github.com/leasehold/leasehold/internal/pgbouncer"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// partitionsEnv is the database side of the partitions suite: a database of
// its own on the benchmarked server, so that its transaction counters
// (pg_stat_database) count the members' statements and nothing else.
type partitionsEnv struct {
	admin    *pgxpool.Pool   // the server's URL database: CREATE/DROP DATABASE, statistics reads
	base     *pgxpool.Config // the bench database; members derive their pools from copies
	observer *pgxpool.Pool   // partition.Inspect on the bench database
	dbName   string
	version  string // PostgreSQL server_version
	where    string // which server, for the report
	stderr   io.Writer
	// With --pgbouncer: the pooler the members connect through, and the
	// URL of their LISTEN sessions, straight to the server.
	bouncer   *pgbouncer.Bouncer
	listenURL string
}

// openPartitionsEnv starts (durable unless told otherwise) or connects to the server, creates and migrates
// the bench database, and returns the function that drops it again.
func openPartitionsEnv(ctx context.Context, bounce, durable bool, stderr io.Writer) (env *partitionsEnv, cleanup func(), err error) {
	url, where, stopServer, err := database(ctx, durable)
	if err != nil {
		return nil, nil, err
	}
	undo := undoStack{stopServer}
	cleanup = undo.run
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	acfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, fmt.Errorf("parse database URL: %w", err)
	}
	acfg.MaxConns, acfg.MinConns = 2, 0
	admin, err := pgxpool.NewWithConfig(ctx, acfg)
	if err != nil {
		return nil, nil, err
	}
	undo.push(admin.Close)
	env = &partitionsEnv{admin: admin, where: where, stderr: stderr}
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&env.version); err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	var b [4]byte
	rand.Read(b[:])
	env.dbName = "leasehold_bench_partitions_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(env.dbName)); err != nil {
		return nil, nil, fmt.Errorf("create the bench database (the suite needs a database of its own to count "+
			"its members' transactions; the role needs CREATEDB): %w", err)
	}
	undo.push(func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+quoteIdent(env.dbName)+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(stderr, "partitions: drop database %s: %v\n", env.dbName, err)
		}
	})
	env.base, err = pgxpool.ParseConfig(url)
	if err != nil {
		return nil, nil, err
	}
	env.base.ConnConfig.Database = env.dbName
	env.base.MinConns = 0
	ocfg := env.base.Copy()
	ocfg.MaxConns = 2
	if env.observer, err = pgxpool.NewWithConfig(ctx, ocfg); err != nil {
		return nil, nil, err
	}
	undo.push(env.observer.Close)
	if err := migrate(ctx, env.observer, ""); err != nil {
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	if bounce {
		b, err := pgbouncer.Start(ctx, pgbouncer.Config{Server: url, PoolSize: 50})
		if err != nil {
			return nil, nil, err
		}
		undo.push(func() { b.Remove() })
		env.bouncer = b
		env.listenURL = withDatabase(url, env.dbName)
	}
	return env, cleanup, nil
}

// xacts returns the bench database's committed plus rolled-back
// transactions as the statistics system has them now. It reads them over
// the admin connection, which is on another database, so that the reads
// themselves are not counted.
func (e *partitionsEnv) xacts(ctx context.Context) (int64, error) {
	if _, err := e.admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return 0, err
	}
	var n int64
	err := e.admin.QueryRow(ctx,
		"SELECT coalesce(sum(xact_commit + xact_rollback), 0)::bigint FROM pg_stat_database WHERE datname = $1",
		e.dbName).Scan(&n)
	return n, err
}

// stmtCounter is a pgx tracer that counts the statements a member sends
// (every Exec and Query, on all of its pools and its listening connection).
type stmtCounter struct{ n *atomic.Int64 }

// TraceQueryStart counts one statement.
func (c stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// benchMember is one in-process member of a fleet.
type benchMember struct {
	id    string
	m     *partition.Member
	pool  *pgxpool.Pool   // handed to partition.New, which derives its own pools from it
	proxy *netproxy.Proxy // between the member and the server, or nil
	stmts *atomic.Int64   // statements sent
}

// fleet is the in-process members of one group, every one with TTL ttl and
// the default PollInterval, and a way to wait for the group to converge.
type fleet struct {
	env     *partitionsEnv
	group   string
	n       int
	ttl     time.Duration
	proxied bool // each member connects through a netproxy of its own

	mu      sync.Mutex
	members []*benchMember // the members expected live, in join order
	seq     int
}

var groupSeq atomic.Int64

func newFleet(env *partitionsEnv, name string, n int, ttl time.Duration, proxied bool) *fleet {
	return &fleet{env: env, group: fmt.Sprintf("%s-%d", name, groupSeq.Add(1)), n: n, ttl: ttl, proxied: proxied}
}

// startedFleet starts f.members members of a new group (named after name)
// of f.partitions, TTL f.ttl, and waits until it converged. Close the
// fleet when done, also after an error.
func startedFleet(ctx context.Context, env *partitionsEnv, name string, f partitionsFlags, proxied bool) (*fleet, error) {
	fl := newFleet(env, name, f.partitions, f.ttl, proxied)
	if err := fl.startMany(ctx, f.members); err != nil {
		return fl, err
	}
	_, err := fl.waitConverged(ctx, time.Now(), convergeWithin)
	return fl, err
}

// nextID returns a fresh member id.
func (f *fleet) nextID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	return fmt.Sprintf("bench-%s-%d", f.group, f.seq)
}

// ids returns the ids of the members expected live.
func (f *fleet) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.members))
	for i, bm := range f.members {
		out[i] = bm.id
	}
	return out
}

// waitRun is every member's Run: it holds the partition until told to stop.
func waitRun(ctx context.Context, _ partition.Ownership) { <-ctx.Done() }

// start creates, starts and adds a member with a fresh id.
func (f *fleet) start(ctx context.Context) (*benchMember, error) { return f.startID(ctx, f.nextID()) }

// startID creates, starts and adds a member with id (a new incarnation of
// id when a member of that id ran before).
func (f *fleet) startID(ctx context.Context, id string) (*benchMember, error) {
	bm := &benchMember{id: id, stmts: new(atomic.Int64)}
	cfg := f.env.base.Copy()
	cfg.MaxConns = 1 // the member derives its own pools; this one only carries the configuration
	cfg.ConnConfig.Tracer = stmtCounter{bm.stmts}
	if b := f.env.bouncer; b != nil {
		host, port, _ := net.SplitHostPort(b.Addr())
		p, _ := strconv.Atoi(port)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(p), nil
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if f.proxied {
		cc := cfg.ConnConfig
		if strings.HasPrefix(cc.Host, "/") {
			return nil, fmt.Errorf("the crash part proxies TCP and the server is on a Unix socket (%s)", cc.Host)
		}
		p, err := netproxy.Start(net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))))
		if err != nil {
			return nil, err
		}
		bm.proxy = p
		cc.Host, cc.Port, cc.Fallbacks = "127.0.0.1", uint16(p.Port()), nil
	}
	fail := func(err error) (*benchMember, error) {
		if bm.pool != nil {
			bm.pool.Close()
		}
		if bm.proxy != nil {
			bm.proxy.Close()
		}
		return nil, fmt.Errorf("start member %s: %w", bm.id, err)
	}
	var err error
	if bm.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fail(err)
	}
	db, err := f.env.memberDB(bm.pool)
	if err != nil {
		return fail(err)
	}
	bm.m, err = partition.New(db, partition.Config{
		Group: f.group, Partitions: f.n, ID: bm.id, Run: waitRun,
		Lease: lease.Config{TTL: f.ttl},
	})
	if err != nil {
		return fail(err)
	}
	f.mu.Lock()
	f.members = append(f.members, bm)
	f.mu.Unlock()
	if err := bm.m.Start(ctx); err != nil {
		f.remove(bm)
		return fail(err)
	}
	return bm, nil
}

// startMany starts k members at once.
func (f *fleet) startMany(ctx context.Context, k int) error {
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { _, errs[i] = f.start(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startOneByOne starts k members one after the other, each Start once the
// previous one returned.
func (f *fleet) startOneByOne(ctx context.Context, k int) error {
	took := make([]time.Duration, 0, k)
	for range k {
		t0 := time.Now()
		if _, err := f.start(ctx); err != nil {
			return err
		}
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	fmt.Fprintf(f.env.stderr, "  %d Starts one by one: each took %v at the median, %v at the 90th percentile, %v at most\n",
		k, took[k/2].Round(time.Millisecond), took[k*9/10].Round(time.Millisecond), took[k-1].Round(time.Millisecond))
	return nil
}

// memberConns counts the bench database's server connections, the
// observer's left out.
func (env *partitionsEnv) memberConns(ctx context.Context) (int, error) {
	var n int
	err := env.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`,
		env.dbName).Scan(&n)
	return n - int(env.observer.Stat().TotalConns()), err
}

// pick returns the i-th expected-live member modulo their count.
func (f *fleet) pick(i int) *benchMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[i%len(f.members)]
}

// remove takes bm out of the members expected live.
func (f *fleet) remove(bm *benchMember) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = slices.DeleteFunc(f.members, func(x *benchMember) bool { return x == bm })
}

// stop stops bm within timeout and closes its pool and proxy. It does not
// remove bm from the expected members (remove does).
func stopMember(ctx context.Context, bm *benchMember, timeout time.Duration) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := bm.m.Stop(sctx)
	bm.pool.Close()
	if bm.proxy != nil {
		bm.proxy.Close()
	}
	return err
}

// close stops every member, at once.
func (f *fleet) close(ctx context.Context) error {
	f.mu.Lock()
	ms := f.members
	f.members = nil
	f.mu.Unlock()
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, bm := range ms {
		wg.Go(func() { errs[i] = stopMember(ctx, bm, 15*time.Second) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stmts returns the statements every member of the fleet has sent.
func (f *fleet) stmts() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, bm := range f.members {
		n += bm.stmts.Load()
	}
	return n
}

// convergePoll is how often waitConverged reads the group's status.
const convergePoll = 5 * time.Millisecond

// waitConverged polls partition.Inspect until every partition is held by
// its desired owner and the live members are exactly the expected ones,
// and returns the time since since. It gives up after within.
func (f *fleet) waitConverged(ctx context.Context, since time.Time, within time.Duration) (time.Duration, error) {
	want := f.ids()
	deadline := time.Now().Add(within)
	var last partition.Status
	for {
		db, err := lhDB(f.env.observer, "")
		if err != nil {
			return 0, err
		}
		st, err := partition.Inspect(ctx, db, f.group)
		if err != nil && !errors.Is(err, partition.ErrGroupNotFound) {
			return 0, err
		}
		if groupConverged(st, want) {
			return time.Since(since), nil
		}
		last = st
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("group %s did not converge to members %v within %v: %s", f.group, want, within, describe(last))
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(convergePoll):
		}
	}
}

// groupConverged reports whether every partition of st is held by its
// desired owner and the live members are exactly want.
func groupConverged(st partition.Status, want []string) bool {
	var live []string
	for _, m := range st.Members {
		if m.Live {
			live = append(live, m.ID)
		}
	}
	slices.Sort(live)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(live, w) {
		return false
	}
	for _, p := range st.Partitions {
		if !p.Held || p.Owner != p.Desired {
			return false
		}
	}
	return len(st.Partitions) > 0
}

// describe summarises a group's status for an error message.
func describe(st partition.Status) string {
	var live []string
	for _, m := range st.Members {
		if m.Live {
			live = append(live, m.ID)
		}
	}
	off := 0
	for _, p := range st.Partitions {
		if !p.Held || p.Owner != p.Desired {
			off++
		}
	}
	return fmt.Sprintf("live %v, %d of %d partitions not held by their desired owner", live, off, len(st.Partitions))
}

// memberDB opens a member's DB on pool: through the pooler with --pgbouncer.
func (env *partitionsEnv) memberDB(pool *pgxpool.Pool) (*leasehold.DB, error) {
	if env.bouncer == nil {
		return lhDB(pool, "")
	}
	return leasehold.Open(pool, leasehold.Config{Logger: slog.New(slog.DiscardHandler), TransactionPooling: true,
		ListenURL: env.listenURL})
}

// withDatabase returns the URL u with its database replaced by name.
func withDatabase(u, name string) string {
	pu, err := neturl.Parse(u)
	if err != nil || (pu.Scheme != "postgres" && pu.Scheme != "postgresql") {
		return u + " dbname=" + name
	}
	pu.Path = "/" + name
	return pu.String()
}
