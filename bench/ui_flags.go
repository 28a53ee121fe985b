package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// uiFlags are the ui suite's settings.
type uiFlags struct {
	jobs        int           // jobs in the table, batch items included
	keys        int           // distinct job keys
	span        time.Duration // how far back the seeded jobs were created
	requests    int           // timed requests per page per round
	warmup      int           // untimed requests per page before round 1
	rounds      int           // rounds over every page
	concurrency int           // clients requesting at once
	pages       []string      // the pages measured (names; nil: all)
	trickle     int           // jobs per second the producer enqueues while pages are measured
	failRate    float64       // share of the fleet's runs that fail
	uiConns     int           // MaxConns of the UI's pool
	target      time.Duration // the p99 every page must stay under
	seed        int64         // seeds the data's hashes and the fleet's randomness
	nonDurable  bool
	keepDB      bool
	markdown    bool
	jsonPath    string
	docPath     string
	cpuProfile  string
}

func parseUIFlags(args []string, stderr io.Writer) (uiFlags, error) {
	var f uiFlags
	fs := newSuiteFlags("ui", stderr)
	fs.IntVar(&f.jobs, "jobs", 1_000_000, "jobs in the table, batch items included")
	fs.IntVar(&f.keys, "keys", 0, "distinct job keys; 0 means jobs/5")
	fs.DurationVar(&f.span, "span", 20*time.Hour, "the seeded jobs were created over this much time up to now "+
		"(under the fleet's Retention, 7 days)")
	fs.IntVar(&f.requests, "requests", 300, "timed requests per page per round")
	fs.IntVar(&f.warmup, "warmup", 20, "untimed requests per page before the first round")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds over every page (each round interleaves the pages request by request)")
	fs.IntVar(&f.concurrency, "concurrency", 1, "clients requesting at once (each walks the pages in its own order)")
	pages := fs.String("pages", "", "comma-separated page names to measure (default: all; see the report for names)")
	fs.IntVar(&f.trickle, "trickle", 40, "jobs per second the producer enqueues while the pages are measured (0: none)")
	fs.Float64Var(&f.failRate, "fail-rate", 0.05, "share of the fleet's runs that fail (and are retried or discarded)")
	fs.IntVar(&f.uiConns, "ui-conns", 8, "MaxConns of the UI's pool")
	fs.DurationVar(&f.target, "target", 100*time.Millisecond, "the p99 every page must stay under")
	fs.Int64Var(&f.seed, "seed", 16, "seeds the data's hashes and the fleet's randomness")
	fs.BoolVar(&f.nonDurable, "non-durable", false, "turn the throwaway cluster's fsync, synchronous_commit and full_page_writes off")
	fs.BoolVar(&f.keepDB, "keep-db", false, "keep the bench database at the end (with DATABASE_URL: to EXPLAIN the pages' statements)")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown")
	fs.StringVar(&f.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&f.docPath, "doc", "", "write the machine line, the data's shape and the table into this Markdown file's generated section")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	if f.keys == 0 {
		f.keys = max(f.jobs/5, 1)
	}
	if *pages != "" {
		for _, p := range strings.Split(*pages, ",") {
			f.pages = append(f.pages, strings.TrimSpace(p))
		}
	}
	switch {
	case f.jobs < 1000:
		return f, errors.New("--jobs must be at least 1000")
	case f.keys < 1 || f.requests < 1 || f.rounds < 1 || f.concurrency < 1 || f.uiConns < 1:
		return f, errors.New("--keys, --requests, --rounds, --concurrency and --ui-conns must be at least 1")
	case f.warmup < 0 || f.trickle < 0:
		return f, errors.New("--warmup and --trickle must not be negative")
	case f.failRate < 0 || f.failRate > 1:
		return f, fmt.Errorf("--fail-rate %v is not in 0..1", f.failRate)
	case f.span < time.Minute || f.span > 6*24*time.Hour:
		return f, errors.New("--span must be 1m to 6 days (the fleet keeps finished jobs 7 days)")
	case f.target <= 0:
		return f, errors.New("--target must be positive")
	}
	return f, nil
}

// settings describes the run's settings, for the report.
func (f uiFlags) settings() string {
	return fmt.Sprintf("%d jobs over %v, %d keys, %d timed requests per page x %d rounds (warm-up %d), concurrency %d, "+
		"fleet fed %d jobs/s failing %.0f%%, UI pool %d conns, seed %d",
		f.jobs, f.span, f.keys, f.requests, f.rounds, f.warmup, f.concurrency, f.trickle, 100*f.failRate, f.uiConns, f.seed)
}
