package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/leasehold/leasehold/fence"
)

// report is the outcome of a demo run.
type report struct {
	// Jobs counts the deposits attempted by the lease's legitimate holders.
	Jobs int `json:"jobs"`
	// Processed counts those deposits found applied in the database.
	Processed int `json:"processed"`
	// Duplicates counts deposits applied more than once (extra times).
	Duplicates int `json:"duplicates"`
	// Lost counts the jobs that were not applied.
	Lost int `json:"lost"`
	// FencedRefused counts the stale (zombie) writes that were refused.
	FencedRefused int `json:"fenced_refused"`
	// FailoverMS is the time from the holder's pause to the next grant.
	FailoverMS int64 `json:"failover_ms"`
	// Tokens are the fencing tokens granted, in order.
	Tokens []fence.Token `json:"tokens"`
	// Holders are the owners the Tokens were granted to.
	Holders []string `json:"holders"`
	// Balance is the account's final balance.
	Balance int64 `json:"balance"`
	// ExpectedBalance is the sum of the deposits seen applied.
	ExpectedBalance int64 `json:"expected_balance"`
	// OK reports whether every invariant held.
	OK bool `json:"ok"`
	// Violations describe the invariants that failed.
	Violations []string `json:"violations"`
}

// wantRefused is how many stale writes the story makes: exactly one.
const wantRefused = 1

// violations checks the report's invariants.
func (r report) violations() []string {
	v := []string{}
	if r.Duplicates != 0 {
		v = append(v, fmt.Sprintf("%d duplicate deposits", r.Duplicates))
	}
	if r.Lost != 0 {
		v = append(v, fmt.Sprintf("%d deposits lost", r.Lost))
	}
	if r.FencedRefused != wantRefused {
		v = append(v, fmt.Sprintf("%d stale writes refused, want %d", r.FencedRefused, wantRefused))
	}
	if r.Balance != r.ExpectedBalance {
		v = append(v, fmt.Sprintf("balance %d, but the applied deposits sum to %d", r.Balance, r.ExpectedBalance))
	}
	if len(r.Tokens) == 0 {
		v = append(v, "no tokens granted")
	}
	for i := 1; i < len(r.Tokens); i++ {
		if r.Tokens[i] <= r.Tokens[i-1] {
			v = append(v, fmt.Sprintf("tokens not strictly increasing: %v", r.Tokens))
			break
		}
	}
	return v
}

// print writes the report for people.
func (r report) print(w io.Writer) {
	toks := make([]string, len(r.Tokens))
	for i, t := range r.Tokens {
		toks[i] = fmt.Sprintf("%d (%s)", t, r.Holders[i])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Report")
	fmt.Fprintf(w, "  tokens granted, in order   %s\n", strings.Join(toks, " < "))
	fmt.Fprintf(w, "                             (gaps are normal: every acquire attempt draws from the token sequence)\n")
	fmt.Fprintf(w, "  deposits attempted         %d (by the lease's holder at the time)\n", r.Jobs)
	fmt.Fprintf(w, "  deposits applied           %d\n", r.Processed)
	fmt.Fprintf(w, "  deposits lost              %d\n", r.Lost)
	fmt.Fprintf(w, "  duplicates                 %d\n", r.Duplicates)
	fmt.Fprintf(w, "  stale writes refused       %d (the paused worker's)\n", r.FencedRefused)
	fmt.Fprintf(w, "  failover                   %d ms (from the pause to the next grant)\n", r.FailoverMS)
	fmt.Fprintf(w, "  final balance              %d (applied deposits sum to %d)\n", r.Balance, r.ExpectedBalance)
	if len(r.Violations) == 0 {
		fmt.Fprintln(w, "All invariants hold: one holder's writes at a time, the stale one refused.")
		return
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATED: %s\n", v)
	}
}
