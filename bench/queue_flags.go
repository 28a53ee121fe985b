package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// queueFlags are the queue suite's command-line settings.
type queueFlags struct {
	jobs, txJobs   int
	ioJobs         int           // io-10ms backlog
	hotJobs        int           // hot-key backlog
	holJobs        int           // hol jobs, enqueued at once
	holSlow        time.Duration // hol: the slow jobs' sleep
	fairJobs       int           // fair: tenant A's backlog
	fairEvery      time.Duration // fair: tenant B's interval
	fairB          string        // fair: tenant B's key, in tenant A's partition
	fairCapD       time.Duration // fair: when B jobs not started yet are cut; 0: twice --duration
	limits         bool          // also run leasehold+limits
	concurrency    int           // io-10ms, hol: leasehold Concurrency and River MaxWorkers
	nonDurable     bool          // a throwaway server with fsync, synchronous_commit, full_page_writes off
	partitions     int
	steadyBacklog  int
	enqueueSize    int
	enqueueWorkers int
	latencyJobs    int
	latencySpread  time.Duration
	riverWorkers   int
	lhPoll         time.Duration
	svgPath        string
	docPath        string
	systems        []string
	args           []string // the command line, for the document
	rounds         int
	batch          int
	conns          int
	keys           int
	enqueueBatch   int
	duration       time.Duration
	warmup         bool
	planCacheMode  string
	jsonPath       string
	markdown       bool
	cpuProfile     string
	cases          []string
}

// jobsOf returns the backlog size of case c (for hol, the jobs enqueued
// at once).
func (f queueFlags) jobsOf(c string) int {
	switch c {
	case caseTxOneRow:
		return f.txJobs
	case caseIO:
		return f.ioJobs
	case caseHotKey:
		return f.hotJobs
	case caseHOL:
		return f.holJobs
	case caseFair:
		return f.fairJobs
	}
	return f.jobs
}

func parseQueueFlags(args []string, stderr io.Writer) (queueFlags, error) {
	var f queueFlags
	fs := newSuiteFlags("queue", stderr)
	fs.IntVar(&f.jobs, "jobs", 200000, "backlog of the noop-burndown and keyless cases, enqueued (untimed) before each measurement")
	fs.IntVar(&f.txJobs, "tx-jobs", 0, "backlog of the tx-one-row case; 0 means --jobs/5")
	fs.IntVar(&f.ioJobs, "io-jobs", 20000, "backlog of the io-10ms case (handlers sleeping 10ms), keys as --keys")
	fs.IntVar(&f.hotJobs, "hot-jobs", 20000, "backlog of the hot-key case, every job of one key")
	fs.IntVar(&f.holJobs, "hol-jobs", 2000, "hol: jobs enqueued at once, every 100th slow")
	fs.DurationVar(&f.holSlow, "hol-slow", 2*time.Second, "hol: the slow jobs' sleep (the others sleep 1ms)")
	fs.IntVar(&f.fairJobs, "fair-jobs", 100000, "fair: tenant A's backlog, every job of key \""+fairKeyA+"\", enqueued before the system starts")
	fs.DurationVar(&f.fairEvery, "fair-every", 100*time.Millisecond, "fair: tenant B enqueues one job this often for --duration "+
		"(its key in A's partition)")
	fs.DurationVar(&f.fairCapD, "fair-cap", 0, "fair: from time zero, how long to wait for B's jobs to start before "+
		"counting those not started as started then (a lower bound); 0 means twice --duration")
	fs.BoolVar(&f.limits, "limits", false, "also run leasehold+limits: leasehold with every handler registered with "+
		"queue.WithPolicy(KeyConcurrency 1000, KeyRate 1,000,000 per second), limits declared but never binding, "+
		"reported against leasehold round by round")
	fs.IntVar(&f.concurrency, "concurrency", 100, "io-10ms, hol and fair: leasehold's ProcessorConfig.Concurrency and River's MaxWorkers")
	fs.BoolVar(&f.nonDurable, "non-durable", false, "start the throwaway server with fsync, synchronous_commit and "+
		"full_page_writes off (the default server keeps them on); ignored with DATABASE_URL")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the group: leasehold's member owns them all; raw-sql runs one goroutine per partition")
	fs.IntVar(&f.rounds, "rounds", 5, "rounds; the report gives medians over them and the spread of the per-round ratios")
	fs.IntVar(&f.batch, "batch", 100, "jobs per fetch on both systems (ProcessorConfig.BatchSize; 100 is its default)")
	fs.IntVar(&f.conns, "conns", 0, "MaxConns of both systems' pools; 0 means --partitions")
	fs.IntVar(&f.keys, "keys", 10000, "distinct job keys, job i getting key i mod keys (at most the backlog)")
	fs.IntVar(&f.enqueueBatch, "enqueue-batch", 5000, "jobs per batched insert when building a backlog")
	fs.IntVar(&f.steadyBacklog, "steady-backlog", 20000, "steady: backlog enqueued before the measurement and kept topped up by a producer")
	fs.IntVar(&f.enqueueSize, "enqueue-size", 100, "enqueue-batch: jobs per EnqueueMany / InsertMany / INSERT call")
	fs.IntVar(&f.enqueueWorkers, "enqueue-workers", 4, "enqueue cases: concurrent goroutines inserting")
	fs.IntVar(&f.latencyJobs, "latency-jobs", 200, "idle-latency: jobs enqueued one at a time (fewer if --duration passes first)")
	fs.DurationVar(&f.latencySpread, "latency-spread", 500*time.Millisecond, "idle-latency: each job is enqueued 5ms plus "+
		"a random time up to this after the previous one completed; keep it at least any system's poll interval")
	fs.IntVar(&f.riverWorkers, "river-workers", riverMaxWorkers, "River's MaxWorkers on its queue (River's own benchmark uses 2000)")
	fs.DurationVar(&f.lhPoll, "lh-poll", 0, "leasehold's ProcessorConfig.PollInterval; 0 keeps the library default (1s)")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "cap on each measurement: a backlog not finished by then is "+
		"cut (its rate is the jobs finished over the time, the round is marked *); steady and enqueue cases run this long")
	systems := fs.String("systems", strings.Join(queueSystems, ","), "comma-separated systems to run")
	fs.StringVar(&f.svgPath, "svg", "", "also write a bar chart of the results (SVG) to this file")
	fs.StringVar(&f.docPath, "doc", "", "also write the tables into this Markdown file, between the suite's generated-section markers")
	fs.BoolVar(&f.warmup, "warmup", true, "before round 1, burn down a small backlog of every case on every system, untimed")
	fs.StringVar(&f.planCacheMode, "plan-cache-mode", "", "PostgreSQL plan_cache_mode on both systems' pools; \"\" keeps "+
		"the server's (auto), which is what a Processor on an application's pool gets")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown, with a line describing the machine and settings")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (samples labelled system and case)")
	cases := fs.String("cases", strings.Join(queueCases, ","), "comma-separated cases to run")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	f.args = args
	if f.txJobs == 0 {
		f.txJobs = max(f.jobs/5, 1)
	}
	if f.conns == 0 {
		f.conns = f.partitions
	}
	switch {
	case f.jobs < 1 || f.txJobs < 1 || f.ioJobs < 1 || f.hotJobs < 1 || f.holJobs < 1 || f.fairJobs < 1:
		return f, errors.New("--jobs, --tx-jobs, --io-jobs, --hot-jobs, --hol-jobs and --fair-jobs must be at least 1")
	case f.fairEvery < time.Millisecond:
		return f, errors.New("--fair-every must be at least 1ms")
	case f.fairCapD < 0:
		return f, errors.New("--fair-cap must not be negative")
	case f.holSlow < holFast:
		return f, fmt.Errorf("--hol-slow must be at least the fast jobs' %v", holFast)
	case f.concurrency < 1 || f.concurrency > 10000:
		return f, errors.New("--concurrency must be 1 to 10000")
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
	case f.enqueueBatch < 1 || f.enqueueSize < 1 || f.enqueueWorkers < 1 || f.steadyBacklog < 1 || f.latencyJobs < 1:
		return f, errors.New("--enqueue-batch, --enqueue-size, --enqueue-workers, --steady-backlog and --latency-jobs must be at least 1")
	case f.riverWorkers < 1 || f.riverWorkers > 10000:
		return f, errors.New("--river-workers must be 1 to 10000")
	case f.lhPoll < 0 || f.latencySpread < 0:
		return f, errors.New("--lh-poll and --latency-spread must not be negative")
	case f.duration <= 0:
		return f, errors.New("--duration must be positive")
	}
	var err error
	if f.cases, err = pickList("case", "--cases", *cases, queueCases); err != nil {
		return f, err
	}
	f.fairB = fairBKey(f.partitions)
	known := append(slices.Clone(queueSystems), sysQueueLimits)
	for _, s := range strings.Split(*systems, ",") {
		if !slices.Contains(known, s) {
			return f, fmt.Errorf("unknown system %q in --systems (known: %s)", s, strings.Join(known, ", "))
		}
		if slices.Contains(f.systems, s) {
			return f, fmt.Errorf("system %q twice in --systems", s)
		}
		f.systems = append(f.systems, s)
	}
	if f.limits && !slices.Contains(f.systems, sysQueueLimits) {
		// Right after leasehold, so that round 1 runs them back to back.
		i := slices.Index(f.systems, sysQueueLeasehold)
		if i < 0 {
			i = len(f.systems) - 1
		}
		f.systems = slices.Insert(f.systems, i+1, sysQueueLimits)
	}
	if !slices.Contains(f.systems, sysQueueLeasehold) || len(f.systems) < 2 {
		return f, errors.New("--systems must include leasehold and at least one peer (or leasehold+limits)")
	}
	return f, nil
}

// fairCap returns how long the fair case waits, from time zero, for B's
// jobs to start: --fair-cap, or twice d (the measurement's duration), and
// at least d.
func (f queueFlags) fairCap(d time.Duration) time.Duration {
	if f.fairCapD > 0 {
		return max(f.fairCapD, d)
	}
	return 2 * d
}

// settings describes the run's settings for the report.
func (f queueFlags) settings() string {
	pcm := f.planCacheMode
	if pcm == "" {
		pcm = "server default"
	}
	return fmt.Sprintf("%d jobs (noop-burndown, keyless), %d (tx-one-row), %d (io-10ms), %d of one key (hot-key), "+
		"%d (hol, every 100th sleeping %v, at once), fair: %d of key %s and one of key %s every %v (cap %v), "+
		"steady backlog %d, %d partitions, batch %d, pools of %d conns, "+
		"%d keys, concurrency %d (io-10ms, hol, fair), plan_cache_mode %s, enqueue: %d goroutines, %d jobs per batch; "+
		"idle-latency: up to %d jobs, spread %v; %d rounds, %v per measurement",
		f.jobs, f.txJobs, f.ioJobs, f.hotJobs, f.holJobs, f.holSlow, f.fairJobs, fairKeyA, f.fairB, f.fairEvery, f.fairCap(f.duration), f.steadyBacklog, f.partitions, f.batch, f.conns,
		f.keys, f.concurrency, pcm, f.enqueueWorkers, f.enqueueSize, f.latencyJobs, f.latencySpread, f.rounds, f.duration)
}
