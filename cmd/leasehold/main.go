package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	// SIGHUP would otherwise kill the process without running its clean-up,
	// leaving a throwaway cluster on disk. SIGPIPE (say, `leasehold demo |
	// head`) is ignored, so that writes to a closed pipe fail and the demo
	// still cleans up. It is not notified: a process that is notified of
	// SIGPIPE gets it for every broken socket too, and the demo breaks its
	// workers' connections on purpose.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := newRootCmd().ExecuteContext(ctx)
	cause := context.Cause(ctx)
	stop()
	switch {
	case err == nil:
	case cause != nil: // the error is the interruption's consequence
		fmt.Fprintf(os.Stderr, "leasehold: interrupted (%v)\n", cause)
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "leasehold:", err)
		os.Exit(1)
	}
}

// rootOptions holds the flags every command shares.
type rootOptions struct {
	verbose bool
}

func newRootCmd() *cobra.Command {
	opts := &rootOptions{}
	root := &cobra.Command{
		Use:           "leasehold",
		Short:         "Jobs on PostgreSQL leases with fencing tokens",
		Long:          "leasehold runs jobs under PostgreSQL leases that carry strictly increasing fencing tokens.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newChaosCmd(opts))
	root.PersistentFlags().BoolVarP(&opts.verbose, "verbose", "v", false, "show the log records of leasehold's components")
	root.AddCommand(newMigrateCmd(opts), newVersionCmd(), newDemoCmd(opts),
		newStatusCmd(), newEnqueueCmd(), newJobsCmd())
	return root
}

// logger returns the logger handed to leasehold's components: silent unless
// --verbose, then debug-level text on w.
func (o *rootOptions) logger(w io.Writer) *slog.Logger {
	if !o.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// databaseURL returns the --database-url flag's value, else $DATABASE_URL,
// else "".
func databaseURL(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("DATABASE_URL")
}
