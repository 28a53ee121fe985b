package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/lease"
)

func newDemoCmd(opts *rootOptions) *cobra.Command {
	var url string
	var asJSON, withKafka bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a fencing token stop a paused worker's stale write (about 10s)",
		Long: "demo shows three workers competing for one lease. The holder pauses past its TTL,\n" +
			"another worker takes over with a higher fencing token, and the paused worker's\n" +
			"late write is refused. Without --database-url or $DATABASE_URL it runs on a\n" +
			"throwaway PostgreSQL cluster started from the installed server binaries; on an\n" +
			"existing server it uses the schema " + demoSchema + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if withKafka {
				return runKafkaDemoCmd(cmd, url, asJSON, opts) // demo_kafka.go
			}
			story := cmd.OutOrStdout()
			if asJSON {
				story = cmd.ErrOrStderr()
			}
			rep, err := runDemo(cmd.Context(), demoConfig{
				DatabaseURL: databaseURL(url),
				Out:         story,
				Logger:      opts.logger(cmd.ErrOrStderr()),
			})
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(rep); err != nil {
					return err
				}
			} else {
				rep.print(cmd.OutOrStdout())
			}
			if len(rep.Violations) > 0 {
				return fmt.Errorf("demo: invariants violated: %s", strings.Join(rep.Violations, "; "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "database-url", "",
		"use this PostgreSQL server (schema "+demoSchema+") instead of a throwaway cluster (default $DATABASE_URL)")
	cmd.Flags().BoolVar(&withKafka, "kafka", false, "show Kafka partitions consumed exactly once into PostgreSQL, and a zombie consumer refused (in-process Kafka)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the final report as one JSON object (the story goes to stderr)")
	return cmd
}

const (
	demoSchema = "leasehold_demo"
	demoLease  = "demo/account"
	demoTTL    = 2 * time.Second
	// demoMaxBackoff caps the waiting workers' retry interval, so that the
	// failover time shows the TTL rather than the backoff.
	demoMaxBackoff = 250 * time.Millisecond
	// zombieDeposit is the id of the paused worker's late deposit; the
	// legitimate holders' deposits are numbered from 1.
	zombieDeposit = 0
)

// demoConfig configures runDemo.
type demoConfig struct {
	// DatabaseURL names the server to use. Empty starts a throwaway cluster.
	DatabaseURL string
	// Out receives the story, one line per step. Nil discards it.
	Out io.Writer
	// Logger receives the log records of the lease clients and migrations.
	// Nil discards them.
	Logger *slog.Logger
}

// demo is the state of one run of the story.
type demo struct {
	out   io.Writer
	log   *slog.Logger
	start time.Time
	pool  *pgxpool.Pool
	table string // the quoted schema, for the demo tables

	rep      report
	expected int64 // sum of the deposits seen applied by legitimate holders
}

// grant is the outcome of a waiting worker's Acquire.
type grant struct {
	owner string
	lease *lease.Lease
	err   error
	at    time.Time
}

// runDemo runs the story and returns its report, whose Violations list the
// invariants that failed. An error means the story could not be told.
func runDemo(ctx context.Context, cfg demoConfig) (report, error) {
	d := &demo{out: cfg.Out, log: cfg.Logger, start: time.Now(), table: pgx.Identifier{demoSchema}.Sanitize()}
	if d.out == nil {
		d.out = io.Discard
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	url := cfg.DatabaseURL
	if url == "" {
		d.say("Starting a throwaway PostgreSQL cluster from the installed server binaries...")
		cl, err := pgcluster.Start(ctx, pgcluster.Config{})
		if err != nil {
			return report{}, err
		}
		defer cl.Remove()
		url = cl.URL("postgres")
		d.say("PostgreSQL is up on 127.0.0.1:%d; it is removed when the demo ends.", cl.Port())
	} else {
		d.say("Using the given database, schema %q.", demoSchema)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return report{}, fmt.Errorf("database URL: %w", err)
	}
	defer pool.Close()
	d.pool = pool
	if err := leasehold.Migrate(ctx, pool, leasehold.MigrateConfig{Schema: demoSchema, Logger: d.log}); err != nil {
		return report{}, err
	}
	if err := d.createTables(ctx); err != nil {
		return report{}, err
	}
	if cfg.DatabaseURL != "" {
		defer d.dropTables(context.WithoutCancel(ctx))
	}
	d.say("Schema migrated. Table demo_account has one row: balance 0, fence_token 0.")
	d.say("Every deposit is one fenced conditional write on that row:")
	d.line("    UPDATE demo_account SET balance = balance + $amount, fence_token = $token")
	d.line("    WHERE id = 1 AND fence_token <= $token        -- 0 rows: refused, stale token")
	if err := d.story(ctx); err != nil {
		return report{}, err
	}
	if err := d.tally(ctx); err != nil {
		return report{}, err
	}
	return d.rep, nil
}

// story runs the workers.
func (d *demo) story(ctx context.Context) error {
	clk := newPausableClock()
	defer clk.close()
	var clients []*lease.Client
	defer func() {
		for _, c := range clients {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			c.Close(cctx)
			cancel()
		}
	}()
	for i, clock := range []lease.Clock{clk.Clock, lease.SystemClock{}, lease.SystemClock{}} {
		c, err := lease.New(d.pool, lease.Config{
			Schema: demoSchema, Owner: fmt.Sprintf("worker-%d", i+1), TTL: demoTTL,
			MaxBackoff: demoMaxBackoff, Clock: clock, Logger: d.log,
		})
		if err != nil {
			return err
		}
		clients = append(clients, c)
	}
	w1, w2 := clients[0], clients[1]

	// Act 1: worker-1 holds the lease and works.
	d.say("Three workers compete for lease %q (TTL %v) with Acquire.", demoLease, demoTTL)
	l1, err := w1.Acquire(ctx, demoLease)
	if err != nil {
		return err
	}
	d.granted("worker-1", l1.Token())
	d.say("worker-1 asked first and got it: token %d.", l1.Token())
	acqCtx, cancelAcq := context.WithCancel(ctx)
	results := make(chan grant, 2)
	var wg sync.WaitGroup
	defer func() { cancelAcq(); wg.Wait() }()
	for _, c := range clients[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(acqCtx, demoLease)
			results <- grant{owner: c.Owner(), lease: l, err: err, at: time.Now()}
		}()
	}
	d.say("worker-2 and worker-3 block in Acquire, retrying while the lease is held.")
	for i := range 4 {
		if i > 0 {
			if err := sleep(ctx, 700*time.Millisecond); err != nil {
				return err
			}
		}
		if err := d.work(ctx, "worker-1", l1); err != nil {
			return err
		}
	}
	info, err := w2.Inspect(ctx, demoLease)
	if err != nil {
		return err
	}
	why := ""
	if info.Age() > demoTTL {
		why = ": its renewals keep it alive past the TTL"
	}
	d.say("database: %s holds token %d, granted %s ago, renewed %s ago (TTL %v)%s.",
		info.Owner, info.Token, secs(info.Age()), secs(info.Now.Sub(info.RenewedAt)), demoTTL, why)

	// Act 2: worker-1 pauses; the database expires its lease; another takes over.
	clk.pause()
	paused := time.Now()
	d.say("worker-1 PAUSES (think GC pause, SIGSTOP, VM migration): its clock stops, so it")
	d.line("         stops renewing, and from the inside it notices nothing.")
	if info, err = w2.Inspect(ctx, demoLease); err != nil {
		return err
	}
	d.say("database: %s's lease (token %d) expires in %s unless renewed.",
		info.Owner, info.Token, secs(info.ExpiresAt.Sub(info.Now)))
	g, err := await(ctx, results, 10*demoTTL)
	if err != nil {
		return err
	}
	d.granted(g.owner, g.lease.Token())
	d.rep.FailoverMS = g.at.Sub(paused).Milliseconds()
	d.say("%s took over with token %d, %s after worker-1 paused: the database saw the lease expire.",
		g.owner, g.lease.Token(), secs(g.at.Sub(paused)))
	d.say("worker-1 is still paused and still believes it holds token %d: Err() = %v.", l1.Token(), l1.Err())
	for range 3 {
		if err := d.work(ctx, g.owner, g.lease); err != nil {
			return err
		}
	}

	// Act 3: worker-1 resumes as a zombie.
	d.say("worker-1 RESUMES. Its clock has not caught up yet, so its lease still looks valid")
	d.line("         (Err() = %v), and it goes ahead with one more deposit, token %d.", l1.Err(), l1.Token())
	ok, err := d.deposit(ctx, zombieDeposit, 1_000_000, l1.Token())
	if err != nil {
		return err
	}
	if ok {
		d.say("worker-1: deposit with stale token %d APPLIED: fencing failed!", l1.Token())
	} else {
		d.rep.FencedRefused++
		var current fence.Token
		if err := d.pool.QueryRow(ctx, "SELECT fence_token FROM "+d.table+".demo_account WHERE id = 1").Scan(&current); err != nil {
			return err
		}
		d.say("worker-1: deposit with stale token %d REFUSED (0 rows): the row already carries token %d.",
			l1.Token(), current)
	}
	stood := clk.resume()
	select {
	case <-l1.Done():
	case <-time.After(5 * time.Second):
		return errors.New("demo: worker-1's lease did not end after its clock caught up")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	d.say("worker-1's clock catches up by %s; its lease's Done() closes: Err() = %v", secs(stood), l1.Err())

	// Act 4: a clean handover needs no TTL wait.
	if err := g.lease.Release(ctx); err != nil {
		return err
	}
	released, prev := time.Now(), g.owner
	g, err = await(ctx, results, 10*demoTTL)
	if err != nil {
		return err
	}
	d.granted(g.owner, g.lease.Token())
	d.say("%s released the lease; %s, still in Acquire, got it %s later with token %d.",
		prev, g.owner, secs(g.at.Sub(released)), g.lease.Token())
	for range 2 {
		if err := d.work(ctx, g.owner, g.lease); err != nil {
			return err
		}
	}
	return g.lease.Release(ctx)
}

// work makes one deposit as the legitimate holder of l, numbered in order.
func (d *demo) work(ctx context.Context, who string, l *lease.Lease) error {
	if err := l.Err(); err != nil {
		return fmt.Errorf("demo: %s lost its lease unexpectedly: %w", who, err)
	}
	d.rep.Jobs++
	id := d.rep.Jobs
	amount := int64(100 * id)
	ok, err := d.deposit(ctx, id, amount, l.Token())
	if err != nil {
		return err
	}
	if ok {
		d.expected += amount
		d.say("%s: deposit #%d (+%d) with token %d: applied.", who, id, amount, l.Token())
	} else {
		d.say("%s: deposit #%d (+%d) with token %d: REFUSED, though %s holds the lease!", who, id, amount, l.Token(), who)
	}
	return nil
}

// deposit makes the fenced conditional write and reports whether it was
// applied. The same statement records an applied deposit in demo_ledger, so
// that duplicates can be counted from the database.
func (d *demo) deposit(ctx context.Context, id int, amount int64, tok fence.Token) (bool, error) {
	tag, err := d.pool.Exec(ctx, `
WITH applied AS (
    UPDATE `+d.table+`.demo_account SET balance = balance + $1, fence_token = $2
    WHERE id = 1 AND fence_token <= $2
    RETURNING id)
INSERT INTO `+d.table+`.demo_ledger (deposit, amount, token) SELECT $3, $1, $2 FROM applied`,
		amount, int64(tok), id)
	if err != nil {
		return false, fmt.Errorf("demo: deposit #%d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// tally fills the report from the database and checks the invariants.
func (d *demo) tally(ctx context.Context) error {
	rows, err := d.pool.Query(ctx, "SELECT deposit, count(*) FROM "+d.table+".demo_ledger GROUP BY deposit")
	if err != nil {
		return err
	}
	var id, n int
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		d.rep.Duplicates += n - 1
		if id >= 1 && id <= d.rep.Jobs {
			d.rep.Processed++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.pool.QueryRow(ctx, "SELECT balance FROM "+d.table+".demo_account WHERE id = 1").Scan(&d.rep.Balance); err != nil {
		return err
	}
	d.rep.Lost = d.rep.Jobs - d.rep.Processed
	d.rep.ExpectedBalance = d.expected
	d.rep.Violations = d.rep.violations()
	d.rep.OK = len(d.rep.Violations) == 0
	return nil
}

func (d *demo) granted(owner string, tok fence.Token) {
	d.rep.Holders = append(d.rep.Holders, owner)
	d.rep.Tokens = append(d.rep.Tokens, tok)
}

func (d *demo) createTables(ctx context.Context) error {
	_, err := d.pool.Exec(ctx, `
DROP TABLE IF EXISTS `+d.table+`.demo_ledger, `+d.table+`.demo_account;
CREATE TABLE `+d.table+`.demo_account (
    id          int PRIMARY KEY,
    balance     bigint NOT NULL,
    fence_token bigint NOT NULL);
CREATE TABLE `+d.table+`.demo_ledger (
    deposit int    NOT NULL,
    amount  bigint NOT NULL,
    token   bigint NOT NULL);
INSERT INTO `+d.table+`.demo_account VALUES (1, 0, 0);`)
	if err != nil {
		return fmt.Errorf("demo: create tables: %w", err)
	}
	return nil
}

func (d *demo) dropTables(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, "DROP TABLE IF EXISTS "+d.table+".demo_ledger, "+d.table+".demo_account"); err != nil {
		d.say("could not drop the demo tables: %v", err)
	}
}

// say prints one step of the story, stamped with the time since the start.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "%6.2fs  %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// line prints a line of the story without a time stamp.
func (d *demo) line(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

// await returns the next waiting worker's grant.
func await(ctx context.Context, results <-chan grant, timeout time.Duration) (grant, error) {
	select {
	case g := <-results:
		if g.err != nil {
			return g, fmt.Errorf("demo: %s: %w", g.owner, g.err)
		}
		return g, nil
	case <-time.After(timeout):
		return grant{}, fmt.Errorf("demo: no waiting worker acquired the lease within %v", timeout)
	case <-ctx.Done():
		return grant{}, context.Cause(ctx)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// secs formats d as seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
