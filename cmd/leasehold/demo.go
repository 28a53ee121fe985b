package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgcluster"
)

// demoFlags are the demo command's flags.
type demoFlags struct {
	url    string
	asJSON bool
	kafka  bool // the Kafka story instead (demo_kafka.go)
}

func newDemoCmd(opts *rootOptions) *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch three workers run jobs through a crash and a pause, exactly once (about 15s)",
		Long: "demo runs three workers in this process on one group of " + fmt.Sprint(demoPartitions) + " partitions and\n" +
			"enqueues " + fmt.Sprint(demoJobs) + " deposit jobs. Midway, worker-1 crashes (its connection cut, never\n" +
			"stopped) and the others take its partitions over once its leases expire; then\n" +
			"worker-2 pauses mid-job past its lease, and its late commits are refused by the\n" +
			"fencing token. The report, counted in the database, shows every job applied\n" +
			"exactly once. Without --database-url or $DATABASE_URL it runs on a throwaway\n" +
			"PostgreSQL cluster started from the installed server binaries; on an existing\n" +
			"server it uses, and drops at the start and the end, the schema " + demoSchema + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.kafka {
				return runKafkaDemoCmd(cmd, f.url, f.asJSON, opts) // demo_kafka.go
			}
			story := cmd.OutOrStdout()
			if f.asJSON {
				story = cmd.ErrOrStderr()
			}
			rep, err := runDemo(cmd.Context(), demoConfig{
				DatabaseURL: databaseURL(f.url),
				Out:         story,
				Logger:      opts.logger(cmd.ErrOrStderr()),
			})
			if err != nil {
				return err
			}
			if f.asJSON {
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
	cmd.Flags().StringVar(&f.url, "database-url", "",
		"use this PostgreSQL server (schema "+demoSchema+") instead of a throwaway cluster (default $DATABASE_URL)")
	cmd.Flags().BoolVar(&f.kafka, "kafka", false, "show Kafka partitions consumed exactly once into PostgreSQL, and a zombie consumer refused (in-process Kafka)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the final report as one JSON object (the story goes to stderr)")
	return cmd
}

const (
	demoSchema     = "leasehold_demo"
	demoGroup      = "demo"
	demoPartitions = 12
	demoJobs       = 3000
	demoAccounts   = 200
	// demoProduce is how long the enqueuing of the jobs is spread over.
	demoProduce = 8 * time.Second
	demoTTL     = 2 * time.Second
	// demoWork is each handler's pretend work, so that the run lasts long
	// enough to watch.
	demoWork = 3 * time.Millisecond
)

// demoConfig configures runDemo.
type demoConfig struct {
	// DatabaseURL names the server to use. Empty starts a throwaway cluster.
	DatabaseURL string
	// Out receives the story. Nil discards it. When it is a terminal, the
	// progress bar is redrawn in place.
	Out io.Writer
	// Logger receives the log records of leasehold's components. Nil
	// discards them.
	Logger *slog.Logger
}

// runDemo runs the story and returns its report, whose Violations list the
// invariants that failed. An error means the story could not be told.
func runDemo(ctx context.Context, cfg demoConfig) (report, error) {
	start := time.Now()
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	d := &demo{out: newDisplay(out, isTerminal(out)), log: cfg.Logger, schema: pgx.Identifier{demoSchema}.Sanitize()}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	url, remove, err := demoDatabase(ctx, cfg.DatabaseURL, " (dropped at the start and the end)", d.out.say)
	if err != nil {
		return report{}, err
	}
	defer remove()
	d.url = url
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return report{}, fmt.Errorf("database URL: %w", err)
	}
	defer pool.Close()
	d.pool = pool
	if d.h, err = leasehold.Open(pool, leasehold.Config{Schema: demoSchema, Logger: d.log}); err != nil {
		return report{}, err
	}
	if err := d.dropSchema(ctx); err != nil {
		return report{}, err
	}
	defer func() {
		if err := d.dropSchema(context.WithoutCancel(ctx)); err != nil {
			d.out.say("could not drop the schema %s: %v", demoSchema, err)
		}
	}()
	if err := d.h.Migrate(ctx); err != nil {
		return report{}, err
	}
	if err := history.Install(ctx, pool, demoSchema); err != nil {
		return report{}, fmt.Errorf("demo: lease history: %w", err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+d.schema+`.demo_ledger (
    n         bigserial PRIMARY KEY,
    job_id    bigint NOT NULL,
    account   text   NOT NULL,
    seq       int    NOT NULL,
    amount    bigint NOT NULL,
    partition int    NOT NULL,
    token     bigint NOT NULL,
    worker    text   NOT NULL)`); err != nil {
		return report{}, fmt.Errorf("demo: create the ledger: %w", err)
	}
	if err := d.story(ctx); err != nil {
		return report{}, err
	}
	if err := d.tally(ctx); err != nil {
		return report{}, err
	}
	d.rep.Seconds = time.Since(start).Seconds()
	return d.rep, nil
}

// dropSchema drops the demo's schema, if it exists.
func (d *demo) dropSchema(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+d.schema+" CASCADE"); err != nil {
		return fmt.Errorf("demo: drop schema %s: %w", demoSchema, err)
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// demoDatabase returns the URL a demo runs on: url (schema demoSchema;
// note says what the demo does to it), or else that of a throwaway cluster
// started from the installed server binaries. remove removes the cluster
// (nothing, for url).
func demoDatabase(ctx context.Context, url, note string, say func(format string, args ...any)) (string, func(), error) {
	if url != "" {
		say("Using the given database, schema %q%s.", demoSchema, note)
		return url, func() {}, nil
	}
	say("Starting a throwaway PostgreSQL cluster from the installed server binaries...")
	cl, err := pgcluster.Start(ctx, pgcluster.Config{})
	if err != nil {
		return "", nil, err
	}
	say("PostgreSQL is up on 127.0.0.1:%d; it is removed when the demo ends.", cl.Port())
	return cl.URL("postgres"), func() { cl.Remove() }, nil
}
