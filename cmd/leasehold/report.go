package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// report is the outcome of a demo run. Every count is read from the
// database at the end of the run (fenced refusals: the queue's outcome of
// the run, confirmed by the absence of its effect in the ledger).
type report struct {
	// Jobs counts the jobs enqueued (their ids returned by the database).
	Jobs int `json:"jobs"`
	// Processed counts the jobs found completed in the database.
	Processed int `json:"processed"`
	// Effects counts the ledger rows: deposits applied by the handlers.
	Effects int `json:"effects"`
	// Duplicates counts the jobs whose deposit was applied more than once.
	Duplicates int `json:"duplicates"`
	// Lost counts the jobs whose work is missing: neither pending nor
	// completed with its deposit applied.
	Lost int `json:"lost"`
	// Pending counts the jobs still pending when the run ended.
	Pending int `json:"pending"`
	// Stray counts the deposits of jobs that are not completed.
	Stray int `json:"stray"`
	// OutOfOrder counts the deposits applied before an earlier job of
	// their account.
	OutOfOrder int `json:"out_of_order"`
	// StaleWrites counts the deposits that landed under an older token of
	// their partition after a newer token had written.
	StaleWrites int `json:"stale_writes"`
	// FencedRefused counts the handler runs whose commit the fence refused
	// and whose deposit is indeed absent from the ledger.
	FencedRefused int `json:"fenced_refused"`
	// FencedByWorker counts the FencedRefused runs by worker.
	FencedByWorker map[string]int `json:"fenced_by_worker"`
	// FencedButApplied counts the runs reported refused by the fence whose
	// deposit is in the ledger nevertheless.
	FencedButApplied int `json:"fenced_but_applied"`
	// FailoverMS is the time from the crash of worker-1 until every
	// partition was held by a live worker.
	FailoverMS int64 `json:"failover_ms"`
	// PauseTakeoverMS is the time from the pause of worker-2 until another
	// worker held every partition.
	PauseTakeoverMS int64 `json:"pause_takeover_ms"`
	// Grants counts the partition lease grants in the lease history.
	Grants int `json:"grants"`
	// Tokens lists each partition's grants' tokens in grant order.
	Tokens map[int][]int64 `json:"tokens"`
	// TokenViolations are the lease history's violations: a token not
	// strictly above its partition's previous one, or overlapping grants.
	TokenViolations []string `json:"token_violations"`
	// ByWorker counts the deposits applied by each worker.
	ByWorker map[string]int `json:"by_worker"`
	// Balance is the sum of the deposits applied.
	Balance int64 `json:"balance"`
	// ExpectedBalance is the sum of the amounts of the jobs enqueued.
	ExpectedBalance int64 `json:"expected_balance"`
	// Seconds is the run's duration, cluster start-up included.
	Seconds float64 `json:"seconds"`
	// OK reports whether every invariant held.
	OK bool `json:"ok"`
	// Violations describe the invariants that failed.
	Violations []string `json:"violations"`
}

// violations checks the report's invariants.
func (r report) violations() []string {
	v := []string{}
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if r.Jobs == 0 {
		bad("no jobs enqueued")
	}
	if r.Processed != r.Jobs {
		bad("%d of %d jobs completed", r.Processed, r.Jobs)
	}
	if r.Duplicates != 0 {
		bad("%d jobs applied more than once", r.Duplicates)
	}
	if r.Lost != 0 {
		bad("%d jobs lost", r.Lost)
	}
	if r.Pending != 0 {
		bad("%d jobs still pending", r.Pending)
	}
	if r.Stray != 0 {
		bad("%d deposits of jobs not completed", r.Stray)
	}
	if r.Effects != r.Processed {
		bad("%d deposits for %d completed jobs", r.Effects, r.Processed)
	}
	if r.OutOfOrder != 0 {
		bad("%d deposits out of their account's order", r.OutOfOrder)
	}
	if r.StaleWrites != 0 {
		bad("%d deposits under a stale token", r.StaleWrites)
	}
	if r.FencedRefused < 1 {
		bad("no stale commit refused by the fence (the paused worker's should have been)")
	}
	if r.FencedButApplied != 0 {
		bad("%d runs reported fenced have their deposit in the ledger", r.FencedButApplied)
	}
	if r.FailoverMS <= 0 || r.PauseTakeoverMS <= 0 {
		bad("takeover not measured (failover %d ms, pause takeover %d ms)", r.FailoverMS, r.PauseTakeoverMS)
	}
	if r.Grants == 0 {
		bad("no lease grants in the history")
	}
	for _, t := range r.TokenViolations {
		bad("lease history: %s", t)
	}
	for p, toks := range r.Tokens {
		for i := 1; i < len(toks); i++ {
			if toks[i] <= toks[i-1] {
				bad("partition %d: tokens not strictly increasing: %v", p, toks)
				break
			}
		}
	}
	if r.Balance != r.ExpectedBalance {
		bad("balance %d, but the jobs enqueued deposit %d", r.Balance, r.ExpectedBalance)
	}
	return v
}

// print writes the report for people.
func (r report) print(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Report (counted in the database)")
	row := func(name, format string, args ...any) {
		fmt.Fprintf(w, "  %-26s %s\n", name, fmt.Sprintf(format, args...))
	}
	row("jobs enqueued", "%d", r.Jobs)
	row("jobs processed", "%d (completed)", r.Processed)
	row("effects applied", "%d (ledger rows; by worker: %s)", r.Effects, byWorker(r.ByWorker))
	row("duplicates", "%d", r.Duplicates)
	row("lost", "%d", r.Lost)
	row("out of key order", "%d", r.OutOfOrder)
	row("fenced writes refused", "%d (late commits under a superseded token; by worker: %s)", r.FencedRefused, byWorker(r.FencedByWorker))
	row("failover after a crash", "%d ms (crash to every partition held again; a lease expires %v", r.FailoverMS, demoTTL)
	fmt.Fprintf(w, "  %-26s %s\n", "", "after its last renewal)")
	row("takeover after a pause", "%d ms (pause to every partition held by another worker)", r.PauseTakeoverMS)
	row("tokens per partition", "%s", r.tokenSummary())
	row("balance", "%d (the jobs enqueued deposit %d)", r.Balance, r.ExpectedBalance)
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "All invariants hold: every job applied exactly once, in key order; every stale commit refused.")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATED: %s\n", v)
	}
}

// tokenSummary describes the partitions' token histories, with the
// partition that changed hands most as an example.
func (r report) tokenSummary() string {
	if len(r.Tokens) == 0 {
		return "no grants"
	}
	best := -1
	for p, toks := range r.Tokens {
		if best < 0 || len(toks) > len(r.Tokens[best]) || (len(toks) == len(r.Tokens[best]) && p < best) {
			best = p
		}
	}
	toks := make([]string, len(r.Tokens[best]))
	for i, t := range r.Tokens[best] {
		toks[i] = fmt.Sprint(t)
	}
	verdict := "strictly increasing"
	if len(r.TokenViolations) > 0 {
		verdict = "NOT strictly increasing"
	}
	return fmt.Sprintf("%s over %d grants; e.g. partition %d: %s", verdict, r.Grants, best, strings.Join(toks, " < "))
}

func byWorker(m map[string]int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}
