// Backfill is a resumable backfill over a table: re-price every user from
// this year's price list, as a batch (see docs/batches.md).
//
// The producer reads the user ids in keyset pages and streams them into
// SubmitItems, an item per user whose item key is the user id, so a
// producer that crashed submits again without adding anything twice. Each
// item is re-priced by a transactional handler: the audit row and the new
// price (a fenced conditional write on the user's row) commit with the
// item's completion and the fence check. When the last item finishes, the
// batch's on-complete follow-up writes the run's summary, once. The
// program prints the batch's progress every second until then.
//
//	go run ./examples/backfill                     # crashes after reading 5500 users, then runs again
//	go run ./examples/backfill --crash-after 0     # no crash
//	DATABASE_URL=... go run ./examples/backfill --run reprice-2027 --crash-after 0
//
// With DATABASE_URL, run it a second time with the same --run: the batch
// is found finished, nothing is re-priced twice, and the same summary is
// printed. A new --run re-prices every user again, in a new batch.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/internal/exampledb"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// config is what a run of the program is given. Zero values mean the
// defaults (see withDefaults).
type config struct {
	Run        string        // the batch's name: one per run, never reused
	Users      int           // users seeded into an empty table
	CrashAfter int           // crash after reading this many users (0: no crash)
	Chunk      int           // items per SubmitItems transaction (default: queue.Config's)
	Page       int           // user ids per keyset page (default 1000)
	Every      time.Duration // how often progress is printed (default 1s)
	TTL        time.Duration // the partition leases' TTL (default 3s)
}

func (c config) withDefaults() (config, error) {
	if c.Run == "" || c.Users < 0 || c.CrashAfter < 0 || c.Chunk < 0 || c.Page < 0 || c.Every < 0 || c.TTL < 0 {
		return c, fmt.Errorf("backfill: a run name is required, and no setting may be negative: %+v", c)
	}
	if c.Page == 0 {
		c.Page = 1000
	}
	if c.Every == 0 {
		c.Every = time.Second
	}
	if c.TTL == 0 {
		// Short, so that after the simulated crash the restarted workers
		// take the crashed ones' partitions over within seconds (the
		// library's default is 15s).
		c.TTL = 3 * time.Second
	}
	return c, nil
}

func main() {
	var cfg config
	flag.StringVar(&cfg.Run, "run", "reprice-2027", "the batch's name: one per run")
	flag.IntVar(&cfg.Users, "users", 10000, "users to seed into an empty users table")
	flag.IntVar(&cfg.CrashAfter, "crash-after", 5500, "simulate a crash of the program after submitting this many items, then run again (0: no crash)")
	flag.IntVar(&cfg.Chunk, "chunk", 1000, "items per SubmitItems transaction")
	flag.Parse()
	if _, err := cfg.withDefaults(); err != nil { // before a database is started for nothing
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	exampledb.Main(func(ctx context.Context, db *leasehold.DB, out io.Writer) error {
		return backfill(ctx, db, out, cfg)
	})
}

// backfill runs the program, and, if it crashed (cfg.CrashAfter), runs it
// again as a restarted process would: new workers, a new client, the same
// batch name.
func backfill(ctx context.Context, db *leasehold.DB, out io.Writer, cfg config) error {
	err := run(ctx, db, out, cfg)
	if !errors.Is(err, errCrash) {
		return err
	}
	fmt.Fprintln(out, "--- starting again, as a restarted process would, with the same run name ---")
	cfg.CrashAfter = 0
	return run(ctx, db, out, cfg)
}

// group is the workers' group; the batch is one of its batches.
const group = "backfill"

// run is one run of the program: it seeds the tables if empty, starts two
// workers, creates the batch (or finds it), submits the users unless it
// is sealed, seals it, prints progress until it finishes, and prints the
// summary its follow-up wrote. A simulated crash returns errCrash, the
// workers stopped without releasing their partitions.
func run(ctx context.Context, db *leasehold.DB, out io.Writer, cfg config) (err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return err
	}
	out = &lockedWriter{w: out}
	pool := db.Pool()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, seed, cfg.Users); err != nil {
		return err
	}

	ws := queue.NewWorkers()
	queue.HandleTx(ws, reprice)
	queue.HandleTx(ws, summarize)
	var workers []*worker.Worker
	defer func() {
		stop := context.WithoutCancel(ctx)
		if errors.Is(err, errCrash) {
			// A crash: nothing is released. The leases expire after their
			// TTL; whatever the workers still commit is fenced.
			c, cancel := context.WithCancel(ctx)
			cancel()
			stop = c
		}
		for _, w := range workers {
			if serr := w.Stop(stop); serr != nil && err == nil {
				err = serr
			}
		}
	}()
	for range 2 {
		w, err := worker.New(db, worker.Config{Group: group, Workers: ws, Partitions: 16, Lease: lease.Config{TTL: cfg.TTL}})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		workers = append(workers, w)
	}

	client, err := queue.New(db, queue.Config{SubmitChunk: cfg.Chunk})
	if err != nil {
		return err
	}
	b, err := createBatch(ctx, client, queue.BatchSpec{Group: group, Name: cfg.Run,
		Description: "re-price every user from the plans table",
		OnComplete:  &queue.FollowUp{Args: Summarize{Run: cfg.Run}}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "run %q: batch %d, %s, %d items so far\n", cfg.Run, b.ID, b.State(), b.Total)

	// The progress printer runs beside the producer.
	pctx, stopProgress := context.WithCancel(ctx)
	p := &progress{c: client, out: out, group: group, name: cfg.Run}
	type result struct {
		b   queue.BatchInfo
		err error
	}
	done := make(chan result, 1)
	var printer sync.WaitGroup
	printer.Go(func() {
		b, err := p.until(pctx, cfg.Every)
		done <- result{b, err}
	})
	defer func() { stopProgress(); printer.Wait() }() // it prints nothing after run returns

	if b.Sealed() {
		fmt.Fprintf(out, "the batch is sealed: its %d items are all in, nothing to submit\n", b.Total)
	} else {
		a, err := client.SubmitItems(ctx, group, cfg.Run, userItems(ctx, pool, cfg.Page, cfg.CrashAfter))
		if errors.Is(err, errCrash) {
			stopProgress()
			printer.Wait()
			// The crash waits for the workers to finish some items, so
			// that it interrupts them mid-batch too.
			b, err := midBatch(ctx, client, cfg.Run)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "simulated crash after reading %d users: %d items added, %d already in the batch; "+
				"the %d of the chunk being built are lost, the batch is not sealed; %d items finished "+
				"(the workers stop without releasing their partitions: their leases expire after the TTL)\n",
				cfg.CrashAfter, a.Added, a.Duplicates, cfg.CrashAfter-a.Items, finished(b))
			return errCrash
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "submitted %d items: %d added, %d already in the batch\n", a.Items, a.Added, a.Duplicates)
		if _, err := client.SealBatch(ctx, group, cfg.Run); err != nil {
			return err
		}
	}
	r := <-done
	if r.err != nil {
		return r.err
	}
	return report(ctx, client, db.Pool(), out, r.b)
}

// createBatch creates the batch, or finds it as an earlier run created it.
// The workers record the kinds they handle when they start serving their
// first partitions: until then the batch is refused (a *KindError), and
// created again a moment later.
func createBatch(ctx context.Context, c *queue.Client, spec queue.BatchSpec) (queue.BatchInfo, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := c.CreateBatch(ctx, spec)
		if !errors.Is(err, queue.ErrNoHandler) || time.Now().After(deadline) {
			return b, err
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// midBatch waits until the workers have finished an item of the batch.
func midBatch(ctx context.Context, c *queue.Client, name string) (queue.BatchInfo, error) {
	for {
		b, err := c.Batch(ctx, group, name)
		if err != nil || finished(b) > 0 {
			return b, err
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// report waits for the on-complete follow-up to run, then prints the
// summary it wrote and checks the outcome: every user re-priced once.
func report(ctx context.Context, c *queue.Client, pool fence.Querier, out io.Writer, b queue.BatchInfo) error {
	for b.CompleteJob != 0 {
		j, err := c.JobInfo(ctx, b.CompleteJob)
		if errors.Is(err, queue.ErrNotFound) {
			break // finished long ago, deleted by retention
		}
		if err != nil {
			return err
		}
		if j.State == queue.StateCompleted {
			break
		}
		if j.State != queue.StatePending {
			return fmt.Errorf("the summary follow-up (job %d) is %s: %v", j.ID, j.State, j.Errors)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	s, err := check(ctx, pool, b.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "summary (the on-complete follow-up): %d users re-priced, monthly total %s -> %s\n",
		s.SummaryUsers, money(s.OldCents), money(s.NewCents))
	fmt.Fprintf(out, "check: %d price changes for %d users, %d users missed, %d re-priced twice, %d at a wrong price, %d summary row(s)\n",
		s.Changes, s.Users, s.Missed, s.Twice, s.WrongPrice, s.Summaries)
	if !s.ok() {
		return fmt.Errorf("the backfill's outcome is wrong: %+v", s)
	}
	return nil
}

func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }
