package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

func init() {
	register(suite{
		name:    "ui",
		summary: "web UI: p50/p95/p99 of every page on a table of 1,000,000 jobs while a worker fleet runs",
		run:     runUI,
	})
}

// uiBench is one run of the ui suite.
type uiBench struct {
	f      uiFlags
	base   *pgxpool.Config // pools on the bench database
	ctl    *pgxpool.Pool   // seeding, targets and checks, outside the measured pools
	app    *queue.Client   // on a producer pool: groups, batches, pauses, the trickle
	uiPool *pgxpool.Pool   // the UI's pool, as the pool of a process serving it
	tracer *stmtTracer     // on uiPool
	tables uiTables
	server ServerSettings
	stderr io.Writer
}

// uiTables are the quoted schema and tables the suite writes.
type uiTables struct{ schema, jobs, totals, counts, pauses string }

func runUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseUIFlags(args, stderr)
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
	b, version, where, cleanup, err := openUIBench(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if where == envURL {
		where += ", " + b.server.String()
	}
	fmt.Fprintf(stderr, "ui suite: PostgreSQL %s, %s; %s\n", version, where, f.settings())
	sd, err := b.seed(ctx)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	if err := b.checkBatchCounts(ctx); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	fmt.Fprintf(stderr, "  %s\n", sd.shape)
	fl, err := b.startFleet(ctx)
	if fl != nil {
		defer fl.stop(ctx)
	}
	if err != nil {
		return fmt.Errorf("start the fleet: %w", err)
	}
	b.feed(ctx, fl)
	ran0, failed0, fed0 := fl.ran.Load(), fl.failed.Load(), fl.enqueued.Load()
	lh, err := lhDB(b.uiPool, "")
	if err != nil {
		return err
	}
	h, err := ui.New(lh, ui.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		MaxIdleConnsPerHost: 2 * f.concurrency, DisableCompression: true}}
	defer client.CloseIdleConnections()
	m := &uiMeter{f: f, client: client, base: srv.URL, stderr: stderr, tracer: b.tracer}
	pages, err := b.pages(ctx, m, sd)
	if err != nil {
		return err
	}
	results, err := m.run(ctx, pages)
	if err != nil {
		return err
	}
	if p := fl.feedErr.Load(); p != nil {
		return fmt.Errorf("producer: %w", *p)
	}
	run := uiFleetStats{Workers: len(fl.workers), Runs: fl.ran.Load() - ran0, Failed: fl.failed.Load() - failed0,
		Enqueued: fl.enqueued.Load() - fed0, Seconds: m.elapsed.Seconds()}
	if err := fl.stop(ctx); err != nil {
		return err
	}
	rep := uiReportOf(f, b.server, sd.shape, run, results)
	machine := machineLine(version+" ("+where+")", f.settings(), began)
	tables := []ptable{uiTable(rep)}
	if st := uiStmtTable(rep); st != nil {
		tables = append(tables, *st)
	}
	printTables(stdout, "ui", machine, f.markdown, tables)
	fmt.Fprintln(stdout, rep.verdict())
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep); err != nil {
			return err
		}
	}
	if f.docPath != "" {
		if err := writeDocSection(f.docPath, "ui", uiDoc(machine, rep, tables)); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "ui suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// openUIBench starts or connects to the server, creates and migrates a
// database of the suite's own, and opens the pools. cleanup closes them
// and drops the database (unless --keep-db).
func openUIBench(ctx context.Context, f uiFlags, stderr io.Writer) (b *uiBench, version, where string, cleanup func(), err error) {
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
	fail := func(err error) (*uiBench, string, string, func(), error) { return nil, "", "", nil, err }
	b = &uiBench{f: f, server: srv.settings, stderr: stderr}
	base, pool, ctl, err := srv.suiteDB(ctx, "ui", f.keepDB, stderr)
	if err != nil {
		return fail(err)
	}
	b.base, b.ctl = base, ctl
	q, err := store.Quote("")
	if err != nil {
		return fail(err)
	}
	b.tables = uiTables{schema: q, jobs: q + ".jobs", totals: q + ".batch_totals", counts: q + ".batch_counts", pauses: q + ".pauses"}
	producer, err := pool("producer", 4)
	if err != nil {
		return fail(err)
	}
	lh, err := lhDB(producer, "")
	if err != nil {
		return fail(err)
	}
	if b.app, err = queue.New(lh, queue.Config{}); err != nil {
		return fail(err)
	}
	if b.tracer, err = newStmtTracer(""); err != nil {
		return fail(err)
	}
	pc := b.base.Copy()
	pc.MaxConns, pc.MinConns = int32(f.uiConns), 0
	pc.ConnConfig.Tracer = b.tracer
	pc.ConnConfig.RuntimeParams["application_name"] = "leasehold-bench-ui-server"
	if b.uiPool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return fail(err)
	}
	undo.push(b.uiPool.Close)
	return b, srv.version, srv.where, cleanup, nil
}
