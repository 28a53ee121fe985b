package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// queueEntry is one run of a case in a round: a system and, when a case
// runs a system more than once with different settings (River in
// tx-one-row), the variant's name.
type queueEntry struct {
	sys     queueSystem
	variant string
}

// label names the entry in progress lines and tables.
func (e queueEntry) label() string {
	if e.variant == "" {
		return e.sys.name()
	}
	return e.sys.name() + " (" + e.variant + ")"
}

// entries returns the runs of case c, systems in the order given: every
// system that takes part in c (caseRuns), River in tx-one-row twice, with
// --river-workers and with as many workers as its pool has connections,
// since either may be the faster (a handler that holds a connection for
// its transaction waits for one when workers outnumber them).
func (q *queueBench) entries(c string, systems []queueSystem) []queueEntry {
	var out []queueEntry
	for _, sys := range systems {
		switch {
		case !caseRuns(c, sys.name()):
		case sys.name() == sysQueueRiver && c == caseTxOneRow && q.riverTx != nil:
			out = append(out, queueEntry{sys, fmt.Sprintf("MaxWorkers %d", q.f.riverWorkers)},
				queueEntry{q.riverTx, fmt.Sprintf("MaxWorkers %d", q.f.conns)})
		default:
			out = append(out, queueEntry{sys: sys})
		}
	}
	return out
}

// rounds runs the warm-up, if wanted, and --rounds rounds of every case on
// every entry, and returns a series per case and entry, in case order.
func (q *queueBench) rounds(ctx context.Context) ([]*series, error) {
	f := q.f
	if f.warmup {
		for _, c := range f.cases {
			for _, e := range q.entries(c, q.systems) {
				if _, err := q.one(ctx, e.sys, c, true); err != nil {
					return nil, fmt.Errorf("warm-up %s on %s: %w", c, e.label(), err)
				}
			}
		}
	}
	var all []*series
	index := map[[2]string]*series{}
	for _, c := range f.cases {
		for _, e := range q.entries(c, q.systems) {
			sr := &series{system: e.sys.name(), kase: c, variant: e.variant}
			all = append(all, sr)
			index[[2]string{e.label(), c}] = sr
		}
	}
	for r := 1; r <= f.rounds; r++ {
		// Rotate which system goes first, so that none always runs right
		// after another's leftovers (autovacuum, dirty pages).
		order := make([]queueSystem, len(q.systems))
		for i := range order {
			order[i] = q.systems[(i+r-1)%len(q.systems)]
		}
		for _, c := range f.cases {
			for _, e := range q.entries(c, order) {
				smp, err := q.one(ctx, e.sys, c, false)
				if errors.Is(err, errCheck) && ctx.Err() == nil {
					// A check that fails once (say a lease lost in an I/O
					// stall of the durable server, whose refused completions
					// the tracer cannot tell from recorded ones) is measured
					// again, once, and said in the report; twice fails.
					what := fmt.Sprintf("round %d, %s on %s: %v", r, c, e.label(), err)
					fmt.Fprintf(q.stderr, "  %s; measuring again\n", what)
					q.remeasured = append(q.remeasured, what)
					smp, err = q.one(ctx, e.sys, c, false)
				}
				if err != nil {
					return nil, fmt.Errorf("round %d, %s on %s: %w", r, c, e.label(), err)
				}
				sr := index[[2]string{e.label(), c}]
				sr.samples = append(sr.samples, smp)
				q.progress(r, c, e, smp)
			}
		}
	}
	return all, nil
}

// progress prints one measurement's line to stderr.
func (q *queueBench) progress(r int, c string, e queueEntry, smp sample) {
	mark := ""
	if smp.short {
		d := q.f.duration
		switch c {
		case caseHOL:
			d = q.f.holCap()
		case caseFair:
			d = q.f.fairCap(d)
		}
		mark = fmt.Sprintf(" (cut at %v)", d)
	}
	if c == caseFair {
		fmt.Fprintf(q.stderr, "  r%d %-14s %-9s A %7d jobs %9.0f jobs/s  B %d jobs, wait p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms%s\n",
			r, c, e.label(), smp.ops, smp.rate(), len(smp.lat), ms(smp.quantile(0.5)), ms(smp.quantile(0.99)),
			ms(smp.quantile(1)), mark)
		return
	}
	fmt.Fprintf(q.stderr, "  r%d %-14s %-9s %7d jobs %9.0f jobs/s  p50 %7.2f ms  p99 %7.2f ms  client CPU %5.1f µs/job (GC %.1f)  %.1f allocs/job%s\n",
		r, c, e.label(), smp.ops, smp.rate(), ms(smp.quantile(0.5)), ms(smp.quantile(0.99)),
		float64(smp.cpuPerOp())/float64(time.Microsecond), float64(smp.gcCPUPerOp())/float64(time.Microsecond),
		smp.allocsPerOp(), mark)
}
