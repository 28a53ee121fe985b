package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
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
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the command line args and returns the exit status. An error
// is printed on stderr as one "leasehold: ..." line; a standard output
// closed by its reader (`leasehold status | head`) ends the command quietly,
// with status 0.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	out := &pipeWriter{w: stdout}
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(out)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		return 0
	case out.closed.Load(): // the reader has gone: nobody to tell
		return 0
	case cause != nil: // the error is the interruption's consequence
		fmt.Fprintf(stderr, "leasehold: interrupted (%v)\n", cause)
		return 1
	default:
		fmt.Fprintln(stderr, errorLine(err))
		return 1
	}
}

// errorLine is the line that reports err: "leasehold: " and the error,
// without repeating the prefix that leasehold's own errors carry.
func errorLine(err error) string {
	return "leasehold: " + strings.TrimPrefix(err.Error(), "leasehold: ")
}

// pipeWriter is the standard output: it records that a write failed because
// the reader closed the pipe (EPIPE; SIGPIPE is ignored).
type pipeWriter struct {
	w      io.Writer
	closed atomic.Bool
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.closed.Store(true)
	}
	return n, err
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
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newChaosCmd(opts))
	root.PersistentFlags().BoolVarP(&opts.verbose, "verbose", "v", false, "show the log records of leasehold's components")
	root.AddCommand(newMigrateCmd(opts), newVersionCmd(), newDemoCmd(opts),
		newStatusCmd(), newEnqueueCmd(), newJobsCmd(), newGroupsCmd(), newBatchCmd(opts), newPeriodicCmd(),
		newPauseCmd(), newResumeCmd(), newUICmd(opts), newOutboxCmd())
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
