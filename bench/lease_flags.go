package main

import (
	"errors"
	"io"
	"strings"
	"time"
)

// leaseFlags are the lease suite's command-line settings.
type leaseFlags struct {
	duration, warmup time.Duration
	rounds, workers  int
	held             int
	batch            int
	slices           int
	planCacheMode    string
	jsonPath         string
	schema           string
	cpuProfile       string
	memProfile       string
	cases            []string
	failoverRounds   int
	failoverTTL      time.Duration
	docPath          string
}

func parseLeaseFlags(args []string, stderr io.Writer) (leaseFlags, error) {
	var f leaseFlags
	fs := newSuiteFlags("lease", stderr)
	fs.DurationVar(&f.duration, "duration", 4*time.Second, "how long each case runs on each system per round")
	fs.DurationVar(&f.warmup, "warmup", 500*time.Millisecond, "untimed warm-up per case and system before round 1, at most duration/4; 0 skips")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds; the report gives medians over them")
	fs.IntVar(&f.slices, "slices", 4, "each case's duration in a round is cut into this many slices, the systems alternating slice by slice")
	fs.IntVar(&f.workers, "workers", 4, "concurrent goroutines per case, each with leases of its own")
	fs.IntVar(&f.held, "held", 8, "leases each worker holds and renews round robin in the renew case")
	fs.IntVar(&f.batch, "batch", 1000, "acquire and release run in batches of this many leases per worker, with untimed "+
		"set-up between batches, so a system holds at most workers*batch leases; 0: one unbounded batch")
	fs.StringVar(&f.planCacheMode, "plan-cache-mode", "force_generic_plan", "PostgreSQL plan_cache_mode for both "+
		"systems' connections; \"\" keeps the server's (auto: plans flip between custom and generic with table statistics)")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&f.schema, "schema", "leasehold_bench", "schema to migrate and benchmark in; its lease table is emptied between measurements")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of the whole run to this file")
	fs.IntVar(&f.failoverRounds, "failover-rounds", 5, "failovers timed per kind (kill -9, graceful stop) of a lease "+
		"held by a separate process; 0 skips them")
	fs.DurationVar(&f.failoverTTL, "failover-ttl", 2*time.Second, "TTL of the failover cases' leases (holder and waiter)")
	fs.StringVar(&f.docPath, "doc", "", "also write the table into this Markdown file, between the suite's generated-section markers")
	cases := fs.String("cases", strings.Join(leaseCases, ","), "comma-separated cases to run")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	switch {
	case f.duration <= 0:
		return f, errors.New("--duration must be positive")
	case f.rounds < 1:
		return f, errors.New("--rounds must be at least 1")
	case f.workers < 1:
		return f, errors.New("--workers must be at least 1")
	case f.held < 1:
		return f, errors.New("--held must be at least 1")
	case f.slices < 1:
		return f, errors.New("--slices must be at least 1")
	case f.batch < 0:
		return f, errors.New("--batch must not be negative")
	case f.failoverRounds < 0 || f.failoverTTL < time.Second:
		return f, errors.New("--failover-rounds must not be negative and --failover-ttl must be at least 1s")
	}
	var err error
	if f.cases, err = pickList("case", "--cases", *cases, leaseCases); err != nil {
		return f, err
	}
	f.warmup = max(min(f.warmup, f.duration/4), 0)
	return f, nil
}
