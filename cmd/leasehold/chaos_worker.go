package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/chaos"
)

// newChaosWorkerCmd is the hidden body of one worker process of a chaos
// run: `leasehold chaos` starts it, with these flags, once per worker.
func newChaosWorkerCmd(opts *rootOptions) *cobra.Command {
	var cfg chaos.WorkerConfig
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "One worker process of a chaos run (started by leasehold chaos)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if opts.verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx, stop := stopSignals(cmd.Context())
			defer stop()
			return chaos.RunWorker(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ID, "id", "", "member id")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "database URL (through the worker's proxy)")
	f.StringVar(&cfg.Workload, "workload", "queue", "workload")
	f.StringVar(&cfg.Env.Schema, "schema", "leasehold_chaos", "schema")
	f.StringVar(&cfg.Env.Group, "group", "chaos", "partition group")
	f.IntVar(&cfg.Env.Partitions, "partitions", 16, "partitions")
	f.IntVar(&cfg.Env.Keys, "keys", 64, "keys")
	f.StringSliceVar(&cfg.Env.Brokers, "brokers", nil, "Kafka seed brokers of the kafka workload (comma-separated)")
	f.DurationVar(&cfg.TTL, "ttl", 2*time.Second, "lease TTL")
	f.Int64Var(&cfg.Seed, "seed", 0, "seed of the handler stalls")
	f.Float64Var(&cfg.StallProbability, "stall", 0, "probability that a handler stalls past the TTL")
	f.StringVar(&cfg.History, "history", "", "history file (JSON lines)")
	f.StringVar(&cfg.SkewFile, "skew-file", "", "file holding the clock offset in milliseconds")
	f.BoolVar(&cfg.Unfenced, "unfenced", false, "apply effects outside the fence (control)")
	return cmd
}

// stopSignals returns a context cancelled by SIGINT or SIGTERM only. A
// chaos run breaks database connections on purpose, and a write to a broken
// connection raises SIGPIPE, which a context of the process's broader
// signals (SIGPIPE included) would take for an interruption.
func stopSignals(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.WithoutCancel(parent), os.Interrupt, syscall.SIGTERM)
}
