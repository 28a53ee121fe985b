package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

func init() {
	register(suite{
		name:    "batch",
		summary: "queue batches: SubmitItems rate and producer memory, batch burn-down against plain jobs, progress reads",
		run:     runBatch,
	})
}

// batchGroup is the partition group of the suite's jobs.
const batchGroup = "bench-batch"

// defaultSubmitChunk is queue.Config.SubmitChunk's default, which the
// sweep compares the other chunk sizes with.
const defaultSubmitChunk = 1000

// batchBench is one run of the batch suite.
type batchBench struct {
	f        batchFlags
	ctl      *pgxpool.Pool // set-up, truncation and checks, outside the measured pools
	lh       *leasehold.DB // on the workers' pool
	producer *pgxpool.Pool // the producer's pool (SubmitItems, EnqueueMany)
	app      *queue.Client // on producer: plain jobs, batches
	reader   *queue.Client // on readPool: the progress reads
	readPool *pgxpool.Pool // the reader's pool, also for the control reads (SELECT 1)
	tables   batchTables
	server   ServerSettings
	stderr   io.Writer
	seq      int // member ids
}

// batchTables are the quoted tables the suite reads and empties.
type batchTables struct{ jobs, groups, batches, totals, counts, kinds string }

// key returns the key of item (or plain job) i: k<i mod --keys>, as the
// queue suite's noop-burndown.
func (b *batchBench) key(i int) string { return "k" + strconv.Itoa(i%b.f.keys) }

func runBatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseBatchFlags(args, stderr)
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
	b, version, where, cleanup, err := openBatchBench(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if where == envURL {
		where += ", " + b.server.String()
	}
	fmt.Fprintf(stderr, "batch suite: PostgreSQL %s, %s; %s\n", version, where, f.settings())
	if err := b.registerKinds(ctx); err != nil {
		return fmt.Errorf("start workers once: %w", err)
	}
	var sweep map[int][]submitResult
	if f.sweepItems > 0 {
		if sweep, err = b.sweep(ctx); err != nil {
			return err
		}
	}
	rounds, err := b.rounds(ctx)
	if err != nil {
		return err
	}
	machine := machineLine(version+" ("+where+")", f.settings(), began)
	tables := batchTablesOf(f, rounds, sweep)
	printTables(stdout, "batch", machine, f.markdown, tables)
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, batchJSONOf(f, b.server, rounds, sweep)); err != nil {
			return err
		}
	}
	if f.docPath != "" {
		if err := writeDocSection(f.docPath, "batch", batchDoc(machine, f, tables)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "batch suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// openBatchBench starts or connects to the server, creates and migrates a
// database of the suite's own (it truncates the jobs table), creates the
// group and opens the pools. cleanup closes them and drops the database.
func openBatchBench(ctx context.Context, f batchFlags, stderr io.Writer) (b *batchBench, version, where string, cleanup func(), err error) {
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
	fail := func(err error) (*batchBench, string, string, func(), error) { return nil, "", "", nil, err }
	where, version = srv.where, srv.version
	server := srv.settings
	b = &batchBench{f: f, server: server, stderr: stderr}
	_, pool, ctl, err := srv.suiteDB(ctx, "batch", false, stderr)
	if err != nil {
		return fail(err)
	}
	b.ctl = ctl
	q, err := store.Quote("")
	if err != nil {
		return fail(err)
	}
	b.tables = batchTables{jobs: q + ".jobs", groups: q + ".groups", batches: q + ".batches",
		totals: q + ".batch_totals", counts: q + ".batch_counts", kinds: q + ".group_kinds"}
	if _, err := b.ctl.Exec(ctx, "INSERT INTO "+b.tables.groups+" (name, partitions) VALUES ($1, $2)", batchGroup, f.partitions); err != nil {
		return fail(fmt.Errorf("create group: %w", err))
	}
	workers, err := pool("workers", f.conns)
	if err != nil {
		return fail(err)
	}
	if b.lh, err = lhDB(workers, ""); err != nil {
		return fail(err)
	}
	// The producer and the reader are the application's: pools of their
	// own, so that neither waits for the workers' connections.
	if b.producer, err = pool("producer", 4); err != nil {
		return fail(err)
	}
	if b.app, err = b.client(b.producer, 0); err != nil {
		return fail(err)
	}
	if b.readPool, err = pool("reader", 2); err != nil {
		return fail(err)
	}
	if b.reader, err = b.client(b.readPool, 0); err != nil {
		return fail(err)
	}
	return b, version, where, cleanup, nil
}

// client returns a queue.Client on pool with SubmitChunk chunk (0: the
// default).
func (b *batchBench) client(pool *pgxpool.Pool, chunk int) (*queue.Client, error) {
	db, err := lhDB(pool, "")
	if err != nil {
		return nil, err
	}
	return queue.New(db, queue.Config{SubmitChunk: chunk})
}

// reset empties the jobs and batch tables and checkpoints, so that each
// measurement starts from the same state and pays for no dirty pages of
// the one before. (No ANALYZE, as the queue suite.)
func (b *batchBench) reset(ctx context.Context) error {
	t := b.tables
	if _, err := b.ctl.Exec(ctx, "TRUNCATE "+t.jobs+", "+t.counts+", "+t.totals+", "+t.batches); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return checkpoint(ctx, b.ctl)
}
