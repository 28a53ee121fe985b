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

// batchFlags are the batch suite's settings.
type batchFlags struct {
	items        int           // N: items per batch (and plain jobs per plain burn-down)
	rounds       int           // rounds of the main measurements
	sweepItems   int           // items per submission of the SubmitChunk sweep
	sweepRounds  int           // rounds of the sweep
	chunks       []int         // SubmitChunk values of the sweep
	partitions   int           // partitions of the group
	batch        int           // ProcessorConfig.BatchSize
	sleep        time.Duration // each handler's run (0: a no-op)
	concurrency  int           // ProcessorConfig.Concurrency (0: the default)
	conns        int           // the workers' pool
	keys         int           // distinct job keys
	enqueueBatch int           // jobs per EnqueueMany call when building the plain backlog
	readEvery    time.Duration // progress reads while the batch burns down
	sampleEvery  time.Duration // heap samples while the producer submits
	timeout      time.Duration // cap of one burn-down
	nonDurable   bool
	markdown     bool
	jsonPath     string
	docPath      string
	cpuProfile   string
}

func parseBatchFlags(args []string, stderr io.Writer) (batchFlags, error) {
	var f batchFlags
	fs := newSuiteFlags("batch", stderr)
	fs.IntVar(&f.items, "items", 1000000, "items per batch, and plain jobs per plain burn-down (N)")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds of submission and burn-downs (plain and batch, alternating which goes first)")
	fs.IntVar(&f.sweepItems, "sweep-items", 200000, "items per submission in the SubmitChunk sweep (0 skips the sweep)")
	fs.IntVar(&f.sweepRounds, "sweep-rounds", 3, "rounds of the SubmitChunk sweep")
	chunks := fs.String("chunks", "250,1000,4000", "SubmitChunk values of the sweep")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the group")
	fs.IntVar(&f.batch, "batch", 100, "jobs per fetch (ProcessorConfig.BatchSize; the queue suite's default)")
	fs.DurationVar(&f.sleep, "handler-sleep", 0, "how long each handler runs (items, plain jobs alike; 0: no-op, the headline case); the queue suite's io-10ms is 10ms")
	fs.IntVar(&f.concurrency, "concurrency", 0, "ProcessorConfig.Concurrency; 0: the library's default (the queue suite's io-10ms uses 100)")
	fs.IntVar(&f.conns, "conns", 0, "MaxConns of the workers' pool; 0 means --partitions (as the queue suite)")
	fs.IntVar(&f.keys, "keys", 10000, "distinct job keys (item i and plain job i both get key k<i mod keys>)")
	fs.IntVar(&f.enqueueBatch, "enqueue-batch", 5000, "jobs per EnqueueMany call when building the plain backlog (as the queue suite)")
	fs.DurationVar(&f.readEvery, "read-every", 100*time.Millisecond, "interval of the progress reads (Client.Batch) during the batch burn-down")
	fs.DurationVar(&f.sampleEvery, "sample-every", 50*time.Millisecond, "interval of the producer's heap samples")
	fs.DurationVar(&f.timeout, "timeout", 20*time.Minute, "cap of one burn-down (a burn-down not finished by then fails the run)")
	fs.BoolVar(&f.nonDurable, "non-durable", false, "turn the throwaway cluster's fsync, synchronous_commit and full_page_writes off")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown")
	fs.StringVar(&f.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&f.docPath, "doc", "", "write the machine line and tables into this Markdown file's generated section")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	if f.conns == 0 {
		f.conns = f.partitions
	}
	for _, s := range strings.Split(*chunks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return f, fmt.Errorf("--chunks: %q is not a positive number", s)
		}
		if !slices.Contains(f.chunks, n) {
			f.chunks = append(f.chunks, n)
		}
	}
	switch {
	case f.items < 1 || f.rounds < 1 || f.sweepItems < 0 || f.sweepRounds < 1:
		return f, errors.New("--items, --rounds and --sweep-rounds must be at least 1, --sweep-items at least 0")
	case f.partitions < 1 || f.batch < 1 || f.conns < 1 || f.keys < 1 || f.enqueueBatch < 1:
		return f, errors.New("--partitions, --batch, --conns, --keys and --enqueue-batch must be at least 1")
	case f.sleep < 0 || f.concurrency < 0:
		return f, errors.New("--handler-sleep and --concurrency must not be negative")
	case f.readEvery <= 0 || f.sampleEvery <= 0 || f.timeout <= 0:
		return f, errors.New("--read-every, --sample-every and --timeout must be positive")
	}
	return f, nil
}

// settings describes the run's settings, for the report.
func (f batchFlags) settings() string {
	sweep := "no SubmitChunk sweep"
	if f.sweepItems > 0 {
		sweep = fmt.Sprintf("SubmitChunk sweep %v over %d items x %d rounds", f.chunks, f.sweepItems, f.sweepRounds)
	}
	handler := "no-op handlers"
	if f.sleep > 0 {
		handler = fmt.Sprintf("handlers sleeping %v", f.sleep)
	}
	if f.concurrency > 0 {
		handler += fmt.Sprintf(", Concurrency %d", f.concurrency)
	}
	return fmt.Sprintf("%d items (N) x %d rounds, %s, %d partitions, %d keys, BatchSize %d, workers' pool %d conns, "+
		"plain backlog by EnqueueMany of %d, progress read every %v, heap sampled every %v; %s",
		f.items, f.rounds, handler, f.partitions, f.keys, f.batch, f.conns, f.enqueueBatch, f.readEvery, f.sampleEvery, sweep)
}
