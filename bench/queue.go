package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	register(suite{
		name:    "queue",
		summary: "leasehold's queue against River and the raw-SQL limit: burndown, steady state, transactional jobs, enqueue, idle latency",
		run:     runQueue,
	})
}

// queueGroup is the partition group the suite's jobs belong to.
const queueGroup = "bench-queue"

// queueBench is one run of the queue suite.
type queueBench struct {
	f       queueFlags
	sql     queueSQL
	ctl     *pgxpool.Pool // set-up, truncation and checks of leasehold's tables, outside the systems' pools
	tracer  *jobTracer    // on leasehold's and raw-sql's pools
	systems []queueSystem // in --systems order
	// riverTx is River with MaxWorkers --conns, run beside River's
	// --river-workers in tx-one-row (nil: no River, or no difference).
	riverTx queueSystem
	server  ServerSettings
	stderr  io.Writer
	// remeasured lists the measurements whose check failed once and that
	// were measured again (see rounds), for the report.
	remeasured []string
}

// key returns job i's key: k<i mod --keys>, so that per-key order never
// holds a fetch back (a partition's keys outnumber the batch).
func (q *queueBench) key(i int) string { return "k" + strconv.Itoa(i%q.f.keys) }

func runQueue(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f, err := parseQueueFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	began := time.Now()
	q, version, where, cleanup, err := openQueueBench(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if where == envURL { // the server's own settings: say which
		where += ", " + q.server.String()
	}
	fmt.Fprintf(stderr, "queue suite: PostgreSQL %s, %s; %s\n", version, where, f.settings())

	all, err := q.rounds(ctx)
	if err != nil {
		return err
	}
	rep := queueReport(f, all)
	rep.Server = &q.server
	machine := machineLine(version+" ("+where+")", f.settings(), began)
	tables := queueTables(rep, all, q.systems)
	for _, m := range q.remeasured {
		tables[0].notes = append(tables[0].notes, "measured again after a failed check (the second measurement is the one reported): "+m)
	}
	printTables(stdout, "queue", machine, f.markdown, tables)
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep); err != nil {
			return err
		}
	}
	if f.svgPath != "" {
		sub := machineShort(version) + "; " + q.server.Kind() + " server"
		if err := writeChart(f.svgPath, "leasehold queue vs River vs the raw-SQL limit", sub, rep); err != nil {
			return err
		}
	}
	if f.docPath != "" {
		section := "queue" // the durable server's; the non-durable one's is a section of its own
		if f.nonDurable {
			section = "queue --non-durable"
		}
		if err := writeDocSection(f.docPath, section, queueDoc(machine, q.systems, tables, f)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "queue suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// openQueueBench starts or connects to the server, creates and migrates a
// database of the suite's own for leasehold and raw-sql (so that truncating
// its jobs table harms nothing) and one for River, and opens the pools.
// cleanup closes them and drops the databases.
func openQueueBench(ctx context.Context, f queueFlags, stderr io.Writer) (q *queueBench, version, where string, cleanup func(), err error) {
	srv, err := openSuiteServer(ctx, f.nonDurable)
	if err != nil {
		return nil, "", "", nil, err
	}
	undo := &srv.undo
	cleanup = undo.run
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	fail := func(err error) (*queueBench, string, string, func(), error) { return nil, "", "", nil, err }
	where, version = srv.where, srv.version
	server := srv.settings
	dbName := randomName("leasehold_bench_queue_")
	createDB := func(name string) error { return srv.createDB(ctx, "queue", name, stderr) }
	if err := createDB(dbName); err != nil {
		return fail(err)
	}
	base, err := srv.poolConfig(dbName)
	if err != nil {
		return fail(err)
	}
	ccfg := base.Copy()
	ccfg.MaxConns = 2
	ctl, err := pgxpool.NewWithConfig(ctx, ccfg)
	if err != nil {
		return fail(err)
	}
	undo.push(ctl.Close)
	if err := migrate(ctx, ctl, ""); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}
	sql, err := renderQueueSQL("")
	if err != nil {
		return fail(err)
	}
	if _, err := ctl.Exec(ctx, "INSERT INTO "+sql.groups+" (name, partitions) VALUES ($1, $2)", queueGroup, f.partitions); err != nil {
		return fail(fmt.Errorf("create group: %w", err))
	}
	if _, err := ctl.Exec(ctx, queueCreateEffects); err != nil {
		return fail(fmt.Errorf("create effects table: %w", err))
	}
	t := newJobTracer(sql, f.partitions)
	q = &queueBench{f: f, sql: sql, ctl: ctl, tracer: t, server: server, stderr: stderr}
	for _, name := range f.systems {
		var sys queueSystem
		switch name {
		case sysQueueLeasehold, sysQueueLimits:
			pool, err := newSystemPool(ctx, base, name, f.conns, t, f.planCacheMode)
			if err != nil {
				return fail(err)
			}
			undo.push(pool.Close)
			lh, err := newLHSystem(q, pool)
			if err != nil {
				return fail(err)
			}
			lh.limits = name == sysQueueLimits
			sys = lh
		case sysQueueRaw:
			// Without JIT, as the Processor sends its fetch (in a
			// transaction of its own, with jit off): here for the whole
			// session, so that the raw loop pays no round trip for it.
			rb := base.Copy()
			rb.ConnConfig.RuntimeParams["jit"] = "off"
			pool, err := newSystemPool(ctx, rb, name, f.conns, t, f.planCacheMode)
			if err != nil {
				return fail(err)
			}
			undo.push(pool.Close)
			sys = &rawQueueSystem{lhTables: lhTables{q}, q: q, pool: pool}
		case sysQueueRiver:
			if err := createDB(dbName + "_river"); err != nil {
				return fail(err)
			}
			rcfg := base.Copy()
			rcfg.ConnConfig.Database = dbName + "_river"
			pool, err := newSystemPool(ctx, rcfg, name, f.conns, nil, f.planCacheMode)
			if err != nil {
				return fail(err)
			}
			undo.push(pool.Close)
			rs, err := newRiverSystem(ctx, q, pool)
			if err != nil {
				return fail(err)
			}
			sys = rs
			if f.conns < f.riverWorkers {
				q.riverTx = rs.withWorkers(f.conns)
			}
		}
		q.systems = append(q.systems, sys)
	}
	return q, version, where, cleanup, nil
}

// lhTables are leasehold's jobs table and the effects table in the
// suite's database, which leasehold and raw-sql share (one at a time).
type lhTables struct{ q *queueBench }

// reset empties the jobs and effects tables.
func (t lhTables) reset(ctx context.Context) error {
	if _, err := t.q.ctl.Exec(ctx, "TRUNCATE "+t.q.sql.jobs+", "+queueEffectsTable); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

// checkpoint checkpoints (the jobs table is not analyzed).
func (t lhTables) checkpoint(ctx context.Context) error {
	return checkpoint(ctx, t.q.ctl)
}

// tally counts the jobs and the effect rows.
func (t lhTables) tally(ctx context.Context) (tally, error) {
	return tallyJobs(ctx, t.q.ctl, t.q.sql.jobs, "pending")
}

// checkpoint checkpoints, so that a measurement does not pay for the
// dirty pages of the inserts before it. It runs no ANALYZE: the jobs
// tables' statistics are what autovacuum made of them, as in an
// application.
func checkpoint(ctx context.Context, db *pgxpool.Pool) error {
	db.Exec(ctx, "CHECKPOINT") // needs privileges a DATABASE_URL role may lack: best effort
	return ctx.Err()
}

// tallyJobs counts the jobs in table (leasehold's or River's, whose
// not-yet-run state is waiting) and the effect rows in db.
func tallyJobs(ctx context.Context, db *pgxpool.Pool, table, waiting string) (tally, error) {
	var t tally
	err := db.QueryRow(ctx, `SELECT count(*),
		count(*) FILTER (WHERE state = 'completed' AND attempt = 1),
		count(*) FILTER (WHERE state = $1),
		count(*) FILTER (WHERE state NOT IN ('completed', $1) OR (state = 'completed' AND attempt <> 1)),
		(SELECT count(*) FROM `+queueEffectsTable+`),
		(SELECT count(*) FROM `+queueEffectsTable+` AS e JOIN `+table+` AS j ON j.id = e.job_id AND j.state = 'completed')
		FROM `+table, waiting).Scan(&t.total, &t.completed, &t.waiting, &t.other, &t.effects, &t.effectsOK)
	return t, err
}
