package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

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
	chaos.WorkerFlags(cmd.Flags(), &cfg)
	return cmd
}

// stopSignals returns a context cancelled by SIGINT or SIGTERM only. A
// chaos run breaks database connections on purpose, and a write to a broken
// connection raises SIGPIPE, which a context of the process's broader
// signals (SIGPIPE included) would take for an interruption.
func stopSignals(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.WithoutCancel(parent), os.Interrupt, syscall.SIGTERM)
}
