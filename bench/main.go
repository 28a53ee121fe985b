// Command bench measures leasehold against baselines on a real PostgreSQL
// server. Each benchmark is a suite, run as
//
//	go run . <suite> [flags]
//
// A suite registers itself from its own file with register; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// suite is one benchmark, selected by name on the command line.
type suite struct {
	name    string
	summary string
	// run parses the suite's flags from args, runs it, prints its report
	// to stdout (progress to stderr) and returns when it is done.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var suites = map[string]suite{}

// register adds s to the suites the command knows. Suites call it from init.
func register(s suite) {
	if _, dup := suites[s.name]; dup {
		panic("bench: suite " + s.name + " registered twice")
	}
	suites[s.name] = s
}

func main() {
	if isLeaseHolder() { // re-executed by the lease suite's failover cases
		os.Exit(leaseHolderMain(os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return 2
	}
	s, ok := suites[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "bench: unknown suite %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 2
		}
		fmt.Fprintf(stderr, "bench %s: %v\n", s.name, err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run . <suite> [flags]    (go run . <suite> -h for the suite's flags)")
	fmt.Fprintln(w, "\nsuites:")
	names := make([]string, 0, len(suites))
	for n := range suites {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, suites[n].summary)
	}
}
