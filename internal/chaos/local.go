package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/partition"
)

// LocalConfig configures a Local fleet. The zero value of every optional
// field means its default.
type LocalConfig struct {
	// DatabaseURL names the server; its schema Schema is dropped at the
	// start and the end. Defaults to a throwaway cluster started from the
	// installed server binaries and removed by Close.
	DatabaseURL string
	// Schema is the schema of the run's tables. Defaults to
	// "leasehold_chaos".
	Schema string
	// Group is the partition group. Defaults to "chaos".
	Group string
	// Workload names the workload. Defaults to "queue".
	Workload string
	// Partitions is the group's partition count. Defaults to 16.
	Partitions int
	// Keys is the number of job keys. Defaults to 64.
	Keys int
	// TTL is the lease TTL. Defaults to 2s.
	TTL time.Duration
	// Unfenced is the control: the members apply effects outside the
	// fenced transaction, and the check must find duplicates.
	Unfenced bool
	// NoPlain runs the queue workload without plain jobs (Env.NoPlain).
	NoPlain bool
	// Say receives one line per set-up step. Defaults to discarding them.
	Say func(format string, args ...any)
	// Logger receives the members' logs. Defaults to a discarding logger.
	Logger *slog.Logger
}

// Local is a fleet of in-process members on the workload of Run, for
// scripted scenarios (the demo): the same database stage, workload, history
// recorders and checker, with members frozen by pausing their clocks,
// holding their handlers at a Gate and cutting their connections at their
// fault proxies, where Run stops, kills and cuts worker processes.
type Local struct {
	cfg LocalConfig
	st  *stage
	dir string // the members' histories

	mu        sync.Mutex
	members   []*Member
	confirmed []int64
}

// OpenLocal sets up the database and the workload. Close undoes it.
func OpenLocal(ctx context.Context, cfg LocalConfig) (*Local, error) {
	def := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&cfg.Partitions, 16)
	def(&cfg.Keys, 64)
	if cfg.TTL <= 0 {
		cfg.TTL = 2 * time.Second
	}
	if cfg.Schema == "" {
		cfg.Schema = defaultSchema
	}
	if cfg.Group == "" {
		cfg.Group = group
	}
	if cfg.Workload == "" {
		cfg.Workload = "queue"
	}
	if cfg.Say == nil {
		cfg.Say = func(string, ...any) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "leasehold-local-")
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	env := Env{Schema: cfg.Schema, Group: cfg.Group, Partitions: cfg.Partitions, Keys: cfg.Keys, NoPlain: cfg.NoPlain}
	st, err := openStage(ctx, cfg.DatabaseURL, cfg.Workload, env, cfg.Logger, cfg.Say)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Local{cfg: cfg, st: st, dir: dir}, nil
}

// Feed produces n items spread evenly over d (Workload.Feed), and keeps
// the ids acknowledged for the check.
func (l *Local) Feed(ctx context.Context, n int, d time.Duration) error {
	ids, err := l.st.wl.Feed(ctx, l.st.pool, l.st.env, n, d)
	l.confirm(ids)
	return err
}

// partitionFeeder is a workload that can feed given partitions.
type partitionFeeder interface {
	FeedPartitions(ctx context.Context, db *pgxpool.Pool, env Env, parts []int) ([]int64, error)
}

// FeedPartitions produces an item in each of the partitions given, beyond
// the plan: work for a member whose partitions ran dry. Only the queue
// workload can.
func (l *Local) FeedPartitions(ctx context.Context, parts []int) error {
	pf, ok := l.st.wl.(partitionFeeder)
	if !ok {
		return fmt.Errorf("chaos: the %s workload cannot feed given partitions", l.st.wl.Name())
	}
	ids, err := pf.FeedPartitions(ctx, l.st.pool, l.st.env, parts)
	l.confirm(ids)
	return err
}

func (l *Local) confirm(ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.confirmed = append(l.confirmed, ids...)
}

// Status returns the group's partitions and their owners.
func (l *Local) Status(ctx context.Context) (partition.Status, error) {
	h, err := handle(l.st.pool, l.st.env.Schema, nil)
	if err != nil {
		return partition.Status{}, err
	}
	return partition.Inspect(ctx, h, l.st.env.Group)
}

// Progress returns how many items were produced, and how many of them are
// finished.
func (l *Local) Progress(ctx context.Context) (done, items int, err error) {
	if items, err = l.st.wl.Items(ctx, l.st.pool, l.st.env); err != nil {
		return 0, 0, err
	}
	out, err := l.st.wl.Outstanding(ctx, l.st.pool, l.st.env)
	// Items and Outstanding are read apart: items produced in between may
	// count as outstanding and not as produced.
	return max(0, items-out), items, err
}

// Stop stops every member: gracefully, or, for a crashed one, by releasing
// its resources.
func (l *Local) Stop(ctx context.Context) {
	l.mu.Lock()
	ms := l.members
	l.members = nil
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			if err := m.stop(ctx, 3*l.cfg.TTL+5*time.Second); err != nil {
				l.cfg.Logger.Warn("chaos: stopping a member failed", "member", m.ID, "err", err)
			}
		})
	}
	wg.Wait()
}

// Check stops the members and checks the run with Check.
func (l *Local) Check(ctx context.Context) (Result, error) {
	l.Stop(ctx)
	l.mu.Lock()
	confirmed := append([]int64(nil), l.confirmed...)
	l.mu.Unlock()
	r, _, err := l.st.check(ctx, confirmed, l.dir)
	return r, err
}

// Tokens returns each partition's grants' tokens, in grant order, from the
// lease audit.
func (l *Local) Tokens(ctx context.Context) (map[int][]int64, error) {
	vs, err := history.Load(ctx, l.st.pool, l.st.env.Schema)
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(partition.LeaseName(l.st.env.Group, 0), "0")
	out := map[int][]int64{}
	for name, gs := range history.Grants(vs) {
		p, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if !strings.HasPrefix(name, prefix) || err != nil {
			continue
		}
		for _, g := range gs {
			out[p] = append(out[p], g.Token)
		}
	}
	return out, nil
}

// Close stops the members, drops the schema of a given server, removes a
// throwaway cluster and the histories.
func (l *Local) Close(ctx context.Context) error {
	l.Stop(ctx)
	err := l.st.close(ctx)
	os.RemoveAll(l.dir)
	return err
}

// OpenDB opens a handle on the run's database and schema, on a pool of
// its own of at most maxConns connections, straight to the server (not
// through a member's fault proxy): for a reader beside the fleet, such as
// the demo's web UI. Call the returned function to close the pool, before
// Close drops the schema.
func (l *Local) OpenDB(ctx context.Context, maxConns int32, log *slog.Logger) (*leasehold.DB, func(), error) {
	pc, err := pgxpool.ParseConfig(l.st.url)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %w", err)
	}
	pc.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: %w", err)
	}
	db, err := handle(pool, l.st.env.Schema, log)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return db, pool.Close, nil
}
