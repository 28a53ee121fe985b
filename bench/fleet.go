package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The fleet suite measures what a fleet of leasehold workers costs the
// database, idle and under a steady trickle of jobs, against River's
// clients at their defaults, in the same run on one durable server.
func init() {
	register(suite{name: "fleet", summary: "database cost of a fleet of workers, idle and under load, vs River",
		run: runFleet})
}

// fleetSize is one fleet: members processes, each a worker (or River
// client), of a group of partitions partitions (leasehold's only).
type fleetSize struct{ members, partitions int }

// String returns the size as the flag writes it, "MxP".
func (s fleetSize) String() string { return fmt.Sprintf("%dx%d", s.members, s.partitions) }

// parseFleetSize parses "MxP".
func parseFleetSize(v string) (fleetSize, error) {
	m, p, ok := strings.Cut(strings.TrimSpace(v), "x")
	mi, err1 := strconv.Atoi(m)
	pi, err2 := strconv.Atoi(p)
	if !ok || err1 != nil || err2 != nil || mi < 1 || pi < 1 {
		return fleetSize{}, fmt.Errorf("fleet size %q: want MxP, members x partitions, both positive", v)
	}
	return fleetSize{members: mi, partitions: pi}, nil
}

// fleetFlags are the fleet suite's settings.
type fleetFlags struct {
	sizes         []fleetSize
	rounds        int
	idle, load    time.Duration
	baseline      time.Duration
	handler       time.Duration
	rate          float64
	statements    bool
	jsonPath      string
	settle        time.Duration
	settleTimeout time.Duration
	drainTimeout  time.Duration

	maxRate       bool
	maxRateSize   fleetSize
	maxRateWindow time.Duration
	maxRateStart  float64
	maxRateCap    float64
	maxRateP99    time.Duration

	// leasehold's settings other than its defaults (zero: the default).
	fetchCooldown, completeInterval, notifyWindow time.Duration
	connMaxIdle                                   time.Duration
	pgbouncer                                     bool // workers of both systems through a PgBouncer in transaction mode
}

// tuned names leasehold's settings set other than their defaults, for the
// report's settings line ("" when none is).
func (f fleetFlags) tuned() string {
	var set []string
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"FetchCooldown", f.fetchCooldown}, {"CompleteInterval", f.completeInterval}, {"NotifyWindow", f.notifyWindow}, {"ConnMaxIdleTime", f.connMaxIdle}} {
		if d.v != 0 {
			set = append(set, fmt.Sprintf("%s %v", d.name, d.v))
		}
	}
	if len(set) == 0 {
		return ""
	}
	return " but " + strings.Join(set, ", ")
}

// parseFleetFlags parses the suite's flags. --quick changes the defaults of
// the sizes, rounds, windows and rate (flags given explicitly win).
func parseFleetFlags(args []string, stderr io.Writer) (fleetFlags, error) {
	var f fleetFlags
	fs := newSuiteFlags("fleet", stderr)
	sizes := fs.String("sizes", "4x64,4x1024,16x256,64x1024", "fleet sizes, comma-separated MxP: M members, P partitions")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds; systems alternate their order from round to round")
	fs.DurationVar(&f.idle, "idle", 20*time.Second, "idle window: no jobs")
	fs.DurationVar(&f.load, "load", 30*time.Second, "load window: jobs offered at --rate")
	fs.DurationVar(&f.baseline, "baseline", 5*time.Second, "no-client window before each fleet starts: the server's own idle CPU (0: none)")
	fs.DurationVar(&f.handler, "handler", 5*time.Millisecond, "each job's handler sleeps this long")
	fs.Float64Var(&f.rate, "rate", 500, "offered jobs per second in the load window, one Enqueue/Insert per job")
	fs.BoolVar(&f.statements, "statements", false, "print the top 5 statements (pg_stat_statements) of each load window")
	fs.StringVar(&f.jsonPath, "json", "", "write the report as JSON to `file`")
	fs.DurationVar(&f.settle, "settle", fleetSettle, "how long a ready fleet runs before the idle window (PostgreSQL 15 flushes an idle backend's counts after 10s)")
	fs.DurationVar(&f.settleTimeout, "settle-timeout", 3*time.Minute, "bound on a fleet's start until its partitions are owned")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", time.Minute, "bound on the wait for the backlog after a load window")
	fs.BoolVar(&f.maxRate, "max-rate", false, "also search the highest rate each system sustains at --max-rate-size (River also at its benchmark settings)")
	mrSize := fs.String("max-rate-size", "4x64", "fleet size of the --max-rate search")
	fs.DurationVar(&f.maxRateWindow, "max-rate-window", 10*time.Second, "load window of each --max-rate step")
	fs.Float64Var(&f.maxRateStart, "max-rate-start", 100, "first rate of the --max-rate search, doubled until it fails")
	fs.Float64Var(&f.maxRateCap, "max-rate-cap", 12800, "highest rate the --max-rate search tries")
	fs.DurationVar(&f.maxRateP99, "max-rate-p99", 100*time.Millisecond, "a sustained rate keeps p99 below this")
	fs.DurationVar(&f.fetchCooldown, "fetch-cooldown", 0, "leasehold workers' Queue.FetchCooldown (0: the default)")
	fs.DurationVar(&f.completeInterval, "complete-interval", 0, "leasehold workers' Queue.CompleteInterval (0: the default)")
	fs.DurationVar(&f.notifyWindow, "notify-window", 0, "leasehold producer's NotifyWindow (0: the default)")
	fs.DurationVar(&f.connMaxIdle, "conn-max-idle", 0, "leasehold workers' ConnMaxIdleTime (0: the default; negative: the pool's own, pgx's 30m)")
	fs.BoolVar(&f.pgbouncer, "pgbouncer", false, "workers of both systems connect through a PgBouncer in transaction mode started by the bench "+
		"(leasehold with TransactionPooling and a direct LISTEN session, River with PollOnly); producers connect directly")
	quick := fs.Bool("quick", false, "tiny run: sizes 2x8, 1 round, settle 1s, idle 1s, load 2s, rate 50")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		for name, v := range map[string]string{"sizes": "2x8", "rounds": "1", "idle": "1s", "load": "2s", "rate": "50", "settle": "1s", "baseline": "1s"} {
			if !set[name] {
				fs.Set(name, v)
			}
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		sz, err := parseFleetSize(s)
		if err != nil {
			return f, err
		}
		f.sizes = append(f.sizes, sz)
	}
	var err error
	if f.maxRateSize, err = parseFleetSize(*mrSize); err != nil {
		return f, err
	}
	if f.rounds < 1 || f.idle <= 0 || f.load <= 0 || f.rate <= 0 || f.handler < 0 {
		return f, fmt.Errorf("--rounds, --idle, --load and --rate must be positive, --handler not negative")
	}
	return f, nil
}

// runFleet is the suite: every size, round and system, then the optional
// rate search, then the report.
func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFleetFlags(args, stderr)
	if err != nil {
		return err
	}
	began := time.Now()
	env, err := openFleetEnv(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer env.srv.undo.run()
	// A size or search that fails is reported, and the others still run
	// and are printed: a large fleet may not fit the machine.
	var errs []error
	rep := fleetReport{flags: f, env: env}
	for _, size := range f.sizes {
		res, err := env.runSize(ctx, f, size)
		if err != nil {
			errs = append(errs, fmt.Errorf("size %s: %w", size, err))
			fmt.Fprintf(stderr, "fleet suite: %v\n", errs[len(errs)-1])
			continue
		}
		rep.sizes = append(rep.sizes, res)
	}
	for _, sys := range append(env.systems(), env.river.atBenchSettings()) {
		if !f.maxRate || ctx.Err() != nil {
			break
		}
		mr, err := env.searchMaxRate(ctx, f, sys)
		if err != nil {
			errs = append(errs, fmt.Errorf("max rate of %s: %w", sys.name(), err))
			continue
		}
		rep.maxRates = append(rep.maxRates, mr)
	}
	rep.print(stdout, began)
	if f.jsonPath != "" {
		errs = append(errs, writeJSON(f.jsonPath, rep.json()))
	}
	fmt.Fprintf(stderr, "fleet suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return errors.Join(errs...)
}
