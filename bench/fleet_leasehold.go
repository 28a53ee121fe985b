package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// lhFleet is leasehold's side: workers at their defaults (but Partitions),
// each with its own pool and *leasehold.DB, and a producer's Client.
type lhFleet struct {
	env      *fleetEnv
	base     *pgxpool.Config
	ctl      *pgxpool.Pool
	producer *queue.Client
	ws       *queue.Workers
	fj       fleetJobs
	group    string
	workers  []*worker.Worker
	pools    []*pgxpool.Pool
}

// newLHFleet creates and migrates leasehold's database and the producer's
// Client on a pool of its own, at pgxpool's default size.
func newLHFleet(ctx context.Context, env *fleetEnv) (*lhFleet, error) {
	base, pool, ctl, err := env.srv.suiteDB(ctx, "fleet", false, env.stderr)
	if err != nil {
		return nil, err
	}
	l := &lhFleet{env: env, base: base, ctl: ctl, ws: queue.NewWorkers()}
	pp, err := pool("producer", int(base.MaxConns))
	if err != nil {
		return nil, err
	}
	db, err := lhDB(pp, "")
	if err != nil {
		return nil, err
	}
	if l.producer, err = queue.New(db, queue.Config{NotifyWindow: env.f.notifyWindow}); err != nil {
		return nil, err
	}
	queue.Handle(l.ws, func(_ context.Context, w *queue.Work[fleetArgs]) error {
		time.Sleep(l.env.f.handler)
		l.fj.finished(w.Args.N)
		return nil
	})
	return l, nil
}

// name returns the system's name.
func (l *lhFleet) name() string { return "leasehold" }

// dbName returns leasehold's database.
func (l *lhFleet) dbName() string { return l.base.ConnConfig.Database }

// jobs returns where the handler reports finished jobs.
func (l *lhFleet) jobs() *fleetJobs { return &l.fj }

// start starts the workers of a fresh group at once and waits until every
// partition is held by its desired owner among them.
func (l *lhFleet) start(ctx context.Context, size fleetSize, round int) error {
	l.group = randomName(fmt.Sprintf("fleet-%s-r%d-", size, round))
	l.workers = make([]*worker.Worker, size.members)
	l.pools = make([]*pgxpool.Pool, size.members)
	ids := make([]string, size.members)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", l.group, i)
	}
	if err := eachMember(size.members, func(i int) error {
		return l.startWorker(ctx, i, ids[i], size.partitions)
	}); err != nil {
		return err
	}
	return l.awaitOwned(ctx, ids, l.env.f.settleTimeout)
}

// startWorker opens worker i's pool (pgxpool's default size) and DB, and
// starts it.
func (l *lhFleet) startWorker(ctx context.Context, i int, id string, partitions int) error {
	pool, err := newSystemPool(ctx, l.env.viaBouncer(l.base), "fleet-lh-"+id, int(l.base.MaxConns), nil, "")
	if err != nil {
		return err
	}
	l.pools[i] = pool
	db, err := lhDB(pool, "")
	if l.env.bouncer != nil {
		// A LISTEN session of each worker's own, as in a fleet of
		// processes (a process shares one per URL: the application name
		// tells the workers' URLs apart).
		listen := withParam(withDatabase(l.base.ConnConfig.ConnString(), l.dbName()), "application_name", "leasehold-bench-queue-fleet-lh-listen-"+id)
		db, err = leasehold.Open(pool, leasehold.Config{Logger: slog.New(slog.DiscardHandler), TransactionPooling: true,
			ListenURL: listen})
	}
	if err != nil {
		return err
	}
	w, err := worker.New(db, worker.Config{Group: l.group, Partitions: partitions, ID: id, Workers: l.ws,
		ConnMaxIdleTime: l.env.f.connMaxIdle,
		Queue:           queue.ProcessorConfig{FetchCooldown: l.env.f.fetchCooldown, CompleteInterval: l.env.f.completeInterval}})
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return fmt.Errorf("start worker %s: %w", id, err)
	}
	l.workers[i] = w
	return nil
}

// awaitOwned polls partition.Inspect until the group has converged on the
// members ids (every partition held by its desired owner, groupConverged),
// for at most within.
func (l *lhFleet) awaitOwned(ctx context.Context, ids []string, within time.Duration) error {
	db, err := lhDB(l.ctl, "")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	for {
		st, err := partition.Inspect(ctx, db, l.group)
		if err != nil && !errors.Is(err, partition.ErrGroupNotFound) {
			return err
		}
		if groupConverged(st, ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s did not converge within %v: %s", l.group, within, describe(st))
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// enqueue enqueues one keyless job of number n.
func (l *lhFleet) enqueue(ctx context.Context, n int64) error {
	_, err := l.producer.Enqueue(ctx, queue.Job{Group: l.group, Args: fleetArgs{N: n}})
	return err
}

// stop stops every worker at once, each within stopBound, and closes the
// pools.
func (l *lhFleet) stop(ctx context.Context) error {
	err := stopMembers(ctx, l.workers, l.pools)
	l.workers, l.pools = nil, nil
	return err
}

// reset empties leasehold's tables of groups, leases, jobs and what
// processing them wrote, and takes a checkpoint.
func (l *lhFleet) reset(ctx context.Context) error {
	q, err := store.Quote("")
	if err != nil {
		return err
	}
	if _, err := l.ctl.Exec(ctx, fmt.Sprintf("TRUNCATE %[1]s.leases, %[1]s.groups, %[1]s.queue_runs, %[1]s.running, "+
		"%[1]s.job_stats, %[1]s.events CASCADE", q)); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return checkpoint(ctx, l.ctl)
}
