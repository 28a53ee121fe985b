package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// The demo, run with --json against a database of its own, tells its story
// on stderr and prints a report on stdout in which every invariant holds:
// each job applied exactly once, the paused worker's late commits refused,
// and both takeovers measured.
func TestDemo(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs([]string{"demo", "--json", "--database-url", url})
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(ctx)
	t.Logf("story:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}

	var rep map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("stdout is not one JSON report: %v\n%s", err, stdout.String())
	}
	num := func(k string) float64 {
		v, ok := rep[k].(float64)
		if !ok {
			t.Fatalf("JSON report lacks the number %q: %s", k, stdout.String())
		}
		return v
	}
	jobs := num("jobs")
	if jobs <= 0 || num("processed") != jobs || num("effects") != jobs {
		t.Errorf("jobs %v, processed %v, effects %v", jobs, num("processed"), num("effects"))
	}
	for _, k := range []string{"duplicates", "lost", "pending", "stray", "out_of_order", "stale_writes", "fenced_but_applied"} {
		if v := num(k); v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	if v := num("fenced_refused"); v < 1 {
		t.Errorf("fenced_refused = %v, want at least 1", v)
	}
	if num("failover_ms") <= 0 || num("pause_takeover_ms") <= 0 {
		t.Errorf("failover_ms %v, pause_takeover_ms %v: not measured", num("failover_ms"), num("pause_takeover_ms"))
	}
	if num("grants") < demoPartitions {
		t.Errorf("%v grants for %d partitions", num("grants"), demoPartitions)
	}
	if ok, _ := rep["ok"].(bool); !ok {
		t.Errorf("ok = false; violations %v", rep["violations"])
	}
	for _, want := range []string{"CRASHES", "FAILOVER", "PAUSES", "TAKEOVER", "REFUSED", "owners"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the story lacks %q", want)
		}
	}

	// The demo drops its schema from a database it was given.
	var n int
	if err := pgtest.PoolURL(t, url).QueryRow(ctx,
		"SELECT count(*) FROM pg_namespace WHERE nspname = $1", demoSchema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s left behind", demoSchema)
	}
}

// The negative control: the report's check flags each kind of violation.
func TestReportViolations(t *testing.T) {
	good := report{Jobs: 3, Processed: 3, Effects: 3, FencedRefused: 1, FailoverMS: 2100, PauseTakeoverMS: 2300,
		Grants: 3, Tokens: map[int][]int64{0: {1, 5}, 1: {2}}, TokenViolations: []string{}, Balance: 30, ExpectedBalance: 30}
	if v := good.violations(); len(v) != 0 {
		t.Fatalf("good report: %v", v)
	}
	for name, bad := range map[string]func(*report){
		"no jobs":            func(r *report) { *r = report{} },
		"not processed":      func(r *report) { r.Processed, r.Effects = 2, 2 },
		"duplicate":          func(r *report) { r.Duplicates, r.Effects = 1, 4 },
		"lost":               func(r *report) { r.Lost = 1 },
		"pending":            func(r *report) { r.Pending = 1 },
		"stray":              func(r *report) { r.Stray, r.Effects = 1, 4 },
		"out of order":       func(r *report) { r.OutOfOrder = 1 },
		"stale write":        func(r *report) { r.StaleWrites = 1 },
		"nothing refused":    func(r *report) { r.FencedRefused = 0 },
		"fenced but applied": func(r *report) { r.FencedButApplied = 1 },
		"no failover":        func(r *report) { r.FailoverMS = 0 },
		"no takeover":        func(r *report) { r.PauseTakeoverMS = 0 },
		"no grants":          func(r *report) { r.Grants = 0 },
		"history":            func(r *report) { r.TokenViolations = []string{"overlap"} },
		"tokens":             func(r *report) { r.Tokens = map[int][]int64{0: {5, 5}} },
		"balance":            func(r *report) { r.Balance = 29 },
	} {
		r := good
		bad(&r)
		if v := r.violations(); len(v) == 0 {
			t.Errorf("%s: no violation found", name)
		}
	}
}
