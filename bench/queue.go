package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

func init() {
	register(suite{
		name:    "queue",
		summary: "queue.Processor burning down a backlog (no-op and one-row transactional jobs) against the same SQL looped raw",
		run:     runQueue,
	})
}

// queueGroup is the partition group the suite's jobs belong to.
const queueGroup = "bench-queue"

// queueTarget is the leasehold/raw-sql rate the noop-burndown case aims for.
const queueTarget = 0.50

// queueBench is one run of the queue suite.
type queueBench struct {
	f       queueFlags
	sql     queueSQL
	ctl     *pgxpool.Pool // set-up, enqueue, truncation and checks, outside both systems' pools
	lh, raw *pgxpool.Pool // the systems' pools: same size and settings
	client  *queue.Client
	stderr  io.Writer
	seq     int // member ids
}

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
	fmt.Fprintf(stderr, "queue suite: PostgreSQL %s, %s; %s\n", version, where, f.settings())

	if f.warmup {
		for _, c := range f.cases {
			n := min(f.jobsOf(c), 2000)
			for _, sys := range []string{sysQueueLeasehold, sysQueueRaw} {
				if _, err := q.one(ctx, sys, c, n); err != nil {
					return fmt.Errorf("warm-up %s on %s: %w", c, sys, err)
				}
			}
		}
	}
	all := make([]*series, 0, 2*len(f.cases))
	index := map[[2]string]*series{}
	for _, c := range f.cases {
		for _, sys := range []string{sysQueueLeasehold, sysQueueRaw} {
			sr := &series{system: sys, kase: c}
			all = append(all, sr)
			index[[2]string{sys, c}] = sr
		}
	}
	for r := 1; r <= f.rounds; r++ {
		// Alternate which system goes first, so that neither always runs
		// right after the other's leftovers (autovacuum, dirty pages).
		order := []string{sysQueueLeasehold, sysQueueRaw}
		if r%2 == 0 {
			order[0], order[1] = order[1], order[0]
		}
		for _, c := range f.cases {
			for _, sys := range order {
				smp, err := q.one(ctx, sys, c, f.jobsOf(c))
				if err != nil {
					return fmt.Errorf("round %d, %s on %s: %w", r, c, sys, err)
				}
				index[[2]string{sys, c}].samples = append(index[[2]string{sys, c}].samples, smp)
				mark := ""
				if smp.short {
					mark = fmt.Sprintf(" (cut at %v)", f.duration)
				}
				fmt.Fprintf(stderr, "  r%d %-13s %-9s %6d jobs %9.0f jobs/s  p50 %7.2f ms  p99 %7.2f ms  client CPU %5.1f µs/job (GC %.1f)  %.1f allocs/job%s\n",
					r, c, sys, smp.ops, smp.rate(), ms(smp.quantile(0.5)), ms(smp.quantile(0.99)),
					float64(smp.cpuPerOp())/float64(time.Microsecond), float64(smp.gcCPUPerOp())/float64(time.Microsecond),
					smp.allocsPerOp(), mark)
			}
		}
	}

	rep := newReport("queue", f.rounds, all, sysQueueLeasehold, sysQueueRaw)
	printTables(stdout, "queue", machineLine(version+" ("+where+")", f.settings(), began), f.markdown, queueTables(rep, all))
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "queue suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// queueTables returns the results table and the ratios table.
func queueTables(rep Report, all []*series) []ptable {
	res := ptable{
		title: "Backlog burndown: jobs/s (medians over rounds)",
		notes: []string{
			"latency: from the start of the fetch that returned a job until the commit that completed it",
			"client CPU: this process's user+system time per job (client and server share the machine)",
		},
		header: []string{"case", "system", "jobs", "jobs/s", "p50 ms", "p99 ms", "client CPU µs/job", "jobs/s per round"},
	}
	cut := false
	for i, s := range all {
		r := rep.Results[i]
		var rounds []string
		var cpu, jobs []float64
		for _, x := range s.samples {
			mark := ""
			if x.short {
				mark, cut = "*", true
			}
			rounds = append(rounds, fmt.Sprintf("%.0f%s", x.rate(), mark))
			cpu = append(cpu, float64(x.cpuPerOp())/float64(time.Microsecond))
			jobs = append(jobs, float64(x.ops))
		}
		res.add(r.Case, r.System, f0(median(jobs)), f0(r.JobsPerSec), f2(r.P50Ms), f2(r.P99Ms), f1(median(cpu)),
			strings.Join(rounds, " "))
	}
	if cut {
		res.notes = append(res.notes, "* the backlog was not finished within --duration: the rate is the jobs finished by then over the time")
	}
	ratios := ptable{
		title:  "leasehold / raw-sql (median jobs/s)",
		header: []string{"case", "ratio", "target", "verdict"},
	}
	for _, r := range rep.Results {
		ratio, ok := rep.Ratios[r.Case]
		if !ok || r.System != sysQueueLeasehold {
			continue
		}
		target, verdict := "-", "-"
		if r.Case == "noop-burndown" {
			target, verdict = f2(queueTarget), "ok"
			if ratio < queueTarget {
				verdict = "BELOW TARGET"
			}
		}
		ratios.add(r.Case, f2(ratio), target, verdict)
	}
	return []ptable{res, ratios}
}

// openQueueBench starts or connects to the server, creates and migrates a
// database of the suite's own (so that truncating its jobs table harms
// nothing), and opens the pools. cleanup closes them and drops the database.
func openQueueBench(ctx context.Context, f queueFlags, stderr io.Writer) (q *queueBench, version, where string, cleanup func(), err error) {
	url, where, stopServer, err := database(ctx)
	if err != nil {
		return nil, "", "", nil, err
	}
	undo := []func(){stopServer}
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	fail := func(err error) (*queueBench, string, string, func(), error) { return nil, "", "", nil, err }

	acfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fail(fmt.Errorf("parse database URL: %w", err))
	}
	acfg.MaxConns, acfg.MinConns = 1, 0
	admin, err := pgxpool.NewWithConfig(ctx, acfg)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, admin.Close)
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	var rb [4]byte
	rand.Read(rb[:])
	dbName := "leasehold_bench_queue_" + hex.EncodeToString(rb[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(dbName)); err != nil {
		return fail(fmt.Errorf("create the bench database (the suite truncates its jobs table, so it uses a database "+
			"of its own; the role needs CREATEDB): %w", err))
	}
	undo = append(undo, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+quoteIdent(dbName)+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(stderr, "queue: drop database %s: %v\n", dbName, err)
		}
	})

	base, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fail(err)
	}
	base.ConnConfig.Database = dbName
	base.MinConns = 0
	ccfg := base.Copy()
	ccfg.MaxConns = 2
	ctl, err := pgxpool.NewWithConfig(ctx, ccfg)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, ctl.Close)
	if err := leasehold.Migrate(ctx, ctl, leasehold.MigrateConfig{Logger: slog.New(slog.DiscardHandler)}); err != nil {
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
	client, err := queue.New(ctl, queue.Config{})
	if err != nil {
		return fail(err)
	}
	t := jobTracer{fetch: sql.fetch, complete: sql.complete}
	lh, err := newSystemPool(ctx, base, sysQueueLeasehold, f.conns, t, f.planCacheMode)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, lh.Close)
	raw, err := newSystemPool(ctx, base, sysQueueRaw, f.conns, t, f.planCacheMode)
	if err != nil {
		return fail(err)
	}
	undo = append(undo, raw.Close)
	q = &queueBench{f: f, sql: sql, ctl: ctl, lh: lh, raw: raw, client: client, stderr: stderr}
	return q, version, where, cleanup, nil
}

// one measures case c on system sys burning down a fresh backlog of n jobs,
// and checks the outcome in the database.
func (q *queueBench) one(ctx context.Context, sys, c string, n int) (sample, error) {
	if err := q.fill(ctx, c, n); err != nil {
		return sample{}, fmt.Errorf("set up: %w", err)
	}
	var smp sample
	var err error
	if sys == sysQueueLeasehold {
		smp, err = q.burnLeasehold(ctx, c, n)
	} else {
		smp, err = q.burnRaw(ctx, c, n)
	}
	if err != nil {
		return smp, err
	}
	if err := q.check(ctx, c, n, smp); err != nil {
		return smp, fmt.Errorf("check: %w", err)
	}
	return smp, nil
}

// fill empties the jobs and effects tables and enqueues a backlog of n jobs
// of case c with EnqueueMany, then analyzes the jobs table (so that both
// systems plan the fetch on the same statistics) and checkpoints (so that
// no measurement pays for another's dirty pages).
func (q *queueBench) fill(ctx context.Context, c string, n int) error {
	if _, err := q.ctl.Exec(ctx, "TRUNCATE "+q.sql.jobs+", "+queueEffectsTable); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	keys := min(q.f.keys, n)
	jobs := make([]queue.Job, 0, min(q.f.enqueueBatch, n))
	for i := range n {
		var a queue.Args = noopJob{N: i}
		if c == "tx-one-row" {
			a = rowJob{N: i}
		}
		jobs = append(jobs, queue.Job{Group: queueGroup, Key: "k" + strconv.Itoa(i%keys), Args: a})
		if len(jobs) == cap(jobs) || i == n-1 {
			if _, err := q.client.EnqueueMany(ctx, jobs...); err != nil {
				return err
			}
			jobs = jobs[:0]
		}
	}
	if _, err := q.ctl.Exec(ctx, "ANALYZE "+q.sql.jobs); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	q.ctl.Exec(ctx, "CHECKPOINT") // needs privileges a DATABASE_URL role may lack: best effort
	return nil
}

// check verifies the burndown in the database: every job completed once (at
// least the counted ones, for a cut measurement), and for tx-one-row exactly
// one effect row per completed job.
func (q *queueBench) check(ctx context.Context, c string, n int, smp sample) error {
	var total, completed, other int
	if err := q.ctl.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = 1),
		count(*) FILTER (WHERE state NOT IN ('completed', 'pending') OR (state = 'completed' AND attempt <> 1))
		FROM `+q.sql.jobs).Scan(&total, &completed, &other); err != nil {
		return err
	}
	switch {
	case total != n:
		return fmt.Errorf("%d jobs in the table, want %d", total, n)
	case other != 0:
		return fmt.Errorf("%d jobs failed, were discarded or ran more than once", other)
	case completed < smp.ops || (!smp.short && completed != n):
		return fmt.Errorf("%d jobs completed, %d counted, %d enqueued", completed, smp.ops, n)
	}
	if c != "tx-one-row" {
		return nil
	}
	var effects int
	if err := q.ctl.QueryRow(ctx, `SELECT count(*) FROM `+queueEffectsTable+` AS e JOIN `+q.sql.jobs+
		` AS j ON j.id = e.job_id AND j.state = 'completed'`).Scan(&effects); err != nil {
		return err
	}
	var all int
	if err := q.ctl.QueryRow(ctx, `SELECT count(*) FROM `+queueEffectsTable).Scan(&all); err != nil {
		return err
	}
	if effects != completed || all != completed {
		return fmt.Errorf("%d effect rows (%d of completed jobs) for %d completed jobs", all, effects, completed)
	}
	return nil
}
