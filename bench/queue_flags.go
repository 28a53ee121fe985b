package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// The queue suite's cases, in the order they run within a round.
var queueCases = []string{"noop-burndown", "tx-one-row"}

// queueFlags are the queue suite's command-line settings.
type queueFlags struct {
	jobs, txJobs  int
	partitions    int
	rounds        int
	batch         int
	conns         int
	keys          int
	enqueueBatch  int
	duration      time.Duration
	warmup        bool
	planCacheMode string
	jsonPath      string
	markdown      bool
	cpuProfile    string
	cases         []string
}

// jobsOf returns the backlog size of case c.
func (f queueFlags) jobsOf(c string) int {
	if c == "tx-one-row" {
		return f.txJobs
	}
	return f.jobs
}

func parseQueueFlags(args []string, stderr io.Writer) (queueFlags, error) {
	var f queueFlags
	fs := flag.NewFlagSet("queue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.jobs, "jobs", 50000, "backlog of the noop-burndown case, enqueued (untimed) before each measurement")
	fs.IntVar(&f.txJobs, "tx-jobs", 0, "backlog of the tx-one-row case; 0 means --jobs/5")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the group: leasehold's member owns them all; raw-sql runs one goroutine per partition")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds; the report gives medians over them")
	fs.IntVar(&f.batch, "batch", 100, "jobs per fetch on both systems (ProcessorConfig.BatchSize; 100 is its default)")
	fs.IntVar(&f.conns, "conns", 0, "MaxConns of both systems' pools; 0 means --partitions")
	fs.IntVar(&f.keys, "keys", 10000, "distinct job keys, job i getting key i mod keys (at most the backlog)")
	fs.IntVar(&f.enqueueBatch, "enqueue-batch", 5000, "jobs per EnqueueMany call when building a backlog")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "cap on each measurement: a backlog not finished by then is "+
		"cut, its rate is the jobs finished over the time, and the round is marked *")
	fs.BoolVar(&f.warmup, "warmup", true, "before round 1, burn down a small backlog of every case on every system, untimed")
	fs.StringVar(&f.planCacheMode, "plan-cache-mode", "", "PostgreSQL plan_cache_mode on both systems' pools; \"\" keeps "+
		"the server's (auto), which is what a Processor on an application's pool gets")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown, with a line describing the machine and settings")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (samples labelled system and case)")
	cases := fs.String("cases", strings.Join(queueCases, ","), "comma-separated cases to run")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run . queue [flags]\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, flag.ErrHelp // fs has printed the error and the usage
	}
	if f.txJobs == 0 {
		f.txJobs = max(f.jobs/5, 1)
	}
	if f.conns == 0 {
		f.conns = f.partitions
	}
	switch {
	case fs.NArg() > 0:
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	case f.jobs < 1 || f.txJobs < 1:
		return f, errors.New("--jobs and --tx-jobs must be at least 1")
	case f.partitions < 1 || f.partitions > 1024:
		return f, errors.New("--partitions must be 1 to 1024")
	case f.rounds < 1:
		return f, errors.New("--rounds must be at least 1")
	case f.batch < 1:
		return f, errors.New("--batch must be at least 1")
	case f.conns < 1:
		return f, errors.New("--conns must be at least 1")
	case f.keys < 1:
		return f, errors.New("--keys must be at least 1")
	case f.enqueueBatch < 1:
		return f, errors.New("--enqueue-batch must be at least 1")
	case f.duration <= 0:
		return f, errors.New("--duration must be positive")
	}
	sel := strings.Split(*cases, ",")
	for _, c := range sel {
		if !slices.Contains(queueCases, c) {
			return f, fmt.Errorf("unknown case %q in --cases (known: %s)", c, strings.Join(queueCases, ", "))
		}
	}
	for _, c := range queueCases { // canonical order
		if slices.Contains(sel, c) {
			f.cases = append(f.cases, c)
		}
	}
	return f, nil
}

// settings describes the run's settings for the report.
func (f queueFlags) settings() string {
	pcm := f.planCacheMode
	if pcm == "" {
		pcm = "server default"
	}
	return fmt.Sprintf("%d jobs (noop-burndown), %d (tx-one-row), %d partitions, batch %d, pools of %d conns, "+
		"%d keys, plan_cache_mode %s, %d rounds, cap %v per measurement",
		f.jobs, f.txJobs, f.partitions, f.batch, f.conns, min(f.keys, f.jobs), pcm, f.rounds, f.duration)
}
