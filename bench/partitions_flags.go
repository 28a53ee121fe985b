package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The partitions suite's parts, in the order they run.
var partitionsParts = []string{"movement", "sweep", "handoff", "crash", "deploy", "load"}

// partitionsFlags are the partitions suite's command-line settings.
type partitionsFlags struct {
	parts       []string
	sets        int
	sweepSets   int
	seed        uint64
	rounds      int // graceful leave/join repetitions
	crashRounds int
	ttl         time.Duration
	partitions  int // partitions of the handoff and crash groups
	members     int // members of the handoff and crash groups before a leave or crash
	loadMembers []int
	loadParts   []int
	loadWindow  time.Duration
	loadSettle  time.Duration
	jsonPath    string
	markdown    bool
	pgbouncer   bool // members connect through a PgBouncer in transaction mode
	nonDurable  bool // the throwaway server without fsync, synchronous_commit, full_page_writes
	// loadOneByOne starts the load part's members one after the other.
	loadOneByOne bool
}

// has reports whether part was selected with --parts.
func (f partitionsFlags) has(part string) bool { return slices.Contains(f.parts, part) }

// needsDB reports whether any selected part runs on PostgreSQL.
func (f partitionsFlags) needsDB() bool {
	return f.has("handoff") || f.has("crash") || f.has("deploy") || f.has("load")
}

func parsePartitionsFlags(args []string, stderr io.Writer) (partitionsFlags, error) {
	var f partitionsFlags
	fs := newSuiteFlags("partitions", stderr)
	parts := fs.String("parts", strings.Join(partitionsParts, ","), "comma-separated parts to run: movement and sweep "+
		"(pure computation), handoff (graceful leave and join), crash (failover), deploy (every member restarted in turn), "+
		"load (statements per member)")
	fs.IntVar(&f.sets, "sets", 20, "random member-id sets per (partitions, members) in movement, besides worker-1..k")
	fs.IntVar(&f.sweepSets, "sweep-sets", 10, "random member-id sets per (partitions, members) and parameter pair in "+
		"sweep, besides worker-1..k (the first of movement's; fewer, since the sweep computes 15 pairs)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the member-id sets and of which member leaves or crashes")
	fs.IntVar(&f.rounds, "rounds", 10, "graceful leaves and joins measured (one of each per round)")
	fs.IntVar(&f.crashRounds, "crash-rounds", 5, "crash failovers measured (each takes about one TTL)")
	fs.DurationVar(&f.ttl, "ttl", 2*time.Second, "lease and membership TTL of every member")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the handoff and crash groups")
	fs.IntVar(&f.members, "members", 4, "members of the handoff and crash groups (a leave or crash leaves one fewer)")
	loadMembers := fs.String("load-members", "1,4,16", "comma-separated member counts of the load part")
	loadParts := fs.String("load-partitions", "64,1024", "comma-separated partition counts of the load part")
	fs.DurationVar(&f.loadWindow, "load-window", 6*time.Second, "steady window over which the load part counts transactions; "+
		"best a whole number of renew intervals (TTL/3) and poll intervals (1s), else the loops' phases quantize the counts")
	fs.DurationVar(&f.loadSettle, "load-settle", 2*time.Second, "quiet time between convergence and the load window "+
		"(lets every backend flush its statistics, at most once a second in PostgreSQL 15)")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&f.loadOneByOne, "load-one-by-one", false, "the load part starts its members one after the other (each Start "+
		"once the previous returned), not all at once")
	fs.BoolVar(&f.nonDurable, "non-durable", false, "start the throwaway server with fsync, synchronous_commit and "+
		"full_page_writes off (durable by default, as users run it)")
	fs.BoolVar(&f.pgbouncer, "pgbouncer", false, "members connect through a PgBouncer in transaction mode started by the bench "+
		"(leasehold.Config.TransactionPooling; each member's LISTEN session straight to the server)")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown, with a line describing the machine and settings")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	var err error
	if f.loadMembers, err = intList("--load-members", *loadMembers); err != nil {
		return f, err
	}
	if f.loadParts, err = intList("--load-partitions", *loadParts); err != nil {
		return f, err
	}
	switch {
	case f.sets < 0 || f.sweepSets < 0:
		return f, errors.New("--sets and --sweep-sets must not be negative")
	case f.rounds < 1 || f.crashRounds < 1:
		return f, errors.New("--rounds and --crash-rounds must be at least 1")
	case f.ttl < time.Second:
		return f, errors.New("--ttl must be at least 1s (lease.MinTTL)")
	case f.partitions < 1:
		return f, errors.New("--partitions must be at least 1")
	case f.members < 2:
		return f, errors.New("--members must be at least 2: one leaves or crashes")
	case f.loadWindow < time.Second || f.loadSettle < 0:
		return f, errors.New("--load-window must be at least 1s and --load-settle not negative")
	}
	sel := strings.Split(*parts, ",")
	for _, p := range sel {
		if !slices.Contains(partitionsParts, p) {
			return f, fmt.Errorf("unknown part %q in --parts (known: %s)", p, strings.Join(partitionsParts, ", "))
		}
	}
	for _, p := range partitionsParts { // canonical order
		if slices.Contains(sel, p) {
			f.parts = append(f.parts, p)
		}
	}
	return f, nil
}

// intList parses a comma-separated list of positive integers.
func intList(name, s string) ([]int, error) {
	var out []int
	for _, x := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", name, x)
		}
		out = append(out, v)
	}
	return out, nil
}
