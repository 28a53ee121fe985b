package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// fleetRiverMaxWorkers is each River client's MaxWorkers on the default
// queue: River has no default (a queue must name it); 100 is the value of
// River's documentation, and leasehold's worker.Config.Concurrency default.
const fleetRiverMaxWorkers = 100

// riverFleet is River's side: clients at River's defaults, each with its
// own pool, and an insert-only client on a pool of its own, on a database
// of River's own.
type riverFleet struct {
	env      *fleetEnv
	base     *pgxpool.Config
	ctl      *pgxpool.Pool
	inserter *river.Client[pgx.Tx]
	fj       fleetJobs
	clients  []*river.Client[pgx.Tx]
	pools    []*pgxpool.Pool
	// benchSettings starts the clients at River's own benchmark settings
	// (FetchCooldown 2ms, FetchPollInterval 20ms) instead of its defaults.
	benchSettings bool
}

// atBenchSettings returns River's side with its clients at River's own
// benchmark settings, on the same database and producer.
func (r *riverFleet) atBenchSettings() *riverFleet {
	return &riverFleet{env: r.env, base: r.base, ctl: r.ctl, inserter: r.inserter, benchSettings: true}
}

// newRiverFleet creates River's database, migrates it and opens the
// insert-only client.
func newRiverFleet(ctx context.Context, env *fleetEnv) (*riverFleet, error) {
	name := randomName("leasehold_bench_fleet_river_")
	if err := env.srv.createDB(ctx, "fleet", name, env.stderr); err != nil {
		return nil, err
	}
	base, err := env.srv.poolConfig(name)
	if err != nil {
		return nil, err
	}
	r := &riverFleet{env: env, base: base}
	if r.ctl, err = r.pool(ctx, "ctl"); err != nil {
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(r.ctl), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate River: %w", err)
	}
	ip, err := r.pool(ctx, "producer")
	if err != nil {
		return nil, err
	}
	r.inserter, err = river.NewClient(riverpgxv5.New(ip), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	return r, err
}

// pool opens a pool on River's database at pgxpool's default size, closed
// with the suite's server.
func (r *riverFleet) pool(ctx context.Context, name string) (*pgxpool.Pool, error) {
	p, err := newSystemPool(ctx, r.base, "fleet-river-"+name, int(r.base.MaxConns), nil, "")
	if err == nil {
		r.env.srv.undo.push(p.Close)
	}
	return p, err
}

// name returns the system's name.
func (r *riverFleet) name() string {
	if r.benchSettings {
		return "river (benchmark settings)"
	}
	return "river"
}

// dbName returns River's database.
func (r *riverFleet) dbName() string { return r.base.ConnConfig.Database }

// jobs returns where the worker reports finished jobs.
func (r *riverFleet) jobs() *fleetJobs { return &r.fj }

// start starts size.members clients at once, each on a pool of its own;
// they are ready when Start returns.
func (r *riverFleet) start(ctx context.Context, size fleetSize, _ int) error {
	r.clients = make([]*river.Client[pgx.Tx], size.members)
	r.pools = make([]*pgxpool.Pool, size.members)
	return eachMember(size.members, func(i int) error { return r.startClient(ctx, i) })
}

// startClient opens client i's pool and starts it at River's defaults
// (FetchCooldown, FetchPollInterval, completer, leader election), or its
// benchmark settings (benchSettings), with MaxWorkers fleetRiverMaxWorkers
// on the default queue.
func (r *riverFleet) startClient(ctx context.Context, i int) error {
	pc := r.env.viaBouncer(r.base)
	pool, err := newSystemPool(ctx, pc, fmt.Sprintf("fleet-river-%d", i), int(pc.MaxConns), nil, "")
	if err != nil {
		return err
	}
	r.pools[i] = pool
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(_ context.Context, j *river.Job[fleetArgs]) error {
		time.Sleep(r.env.f.handler)
		r.fj.finished(j.Args.N)
		return nil
	}))
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: fleetRiverMaxWorkers}},
		Workers: ws,
		Logger:  slog.New(slog.DiscardHandler),
	}
	if r.benchSettings {
		cfg.FetchCooldown, cfg.FetchPollInterval = 2*time.Millisecond, 20*time.Millisecond
	}
	cfg.PollOnly = r.env.bouncer != nil // River's advice behind a transaction pooler
	c, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("start River client %d: %w", i, err)
	}
	r.clients[i] = c
	return nil
}

// enqueue inserts one job of number n with the insert-only client.
func (r *riverFleet) enqueue(ctx context.Context, n int64) error {
	_, err := r.inserter.Insert(ctx, fleetArgs{N: n}, nil)
	return err
}

// stop stops every client at once, each within stopBound, and closes the
// pools.
func (r *riverFleet) stop(ctx context.Context) error {
	err := stopMembers(ctx, r.clients, r.pools)
	r.clients, r.pools = nil, nil
	return err
}

// reset empties River's jobs table and takes a checkpoint.
func (r *riverFleet) reset(ctx context.Context) error {
	if _, err := r.ctl.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return checkpoint(ctx, r.ctl)
}
