package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestDemo(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var story bytes.Buffer
	rep, err := runDemo(ctx, demoConfig{DatabaseURL: url, Out: &story})
	t.Logf("story:\n%s", story.String())
	if err != nil {
		t.Fatalf("runDemo: %v", err)
	}
	if len(rep.Violations) > 0 || !rep.OK {
		t.Errorf("violations: %v", rep.Violations)
	}
	if rep.FencedRefused != 1 {
		t.Errorf("fenced_refused = %d, want 1", rep.FencedRefused)
	}
	if rep.Duplicates != 0 || rep.Lost != 0 {
		t.Errorf("duplicates = %d, lost = %d, want 0", rep.Duplicates, rep.Lost)
	}
	if rep.Jobs == 0 || rep.Processed != rep.Jobs {
		t.Errorf("processed %d of %d jobs", rep.Processed, rep.Jobs)
	}
	if rep.Balance != rep.ExpectedBalance || rep.Balance == 0 {
		t.Errorf("balance %d, expected %d", rep.Balance, rep.ExpectedBalance)
	}
	if len(rep.Tokens) != 3 || len(rep.Holders) != 3 || rep.Holders[0] != "worker-1" {
		t.Fatalf("tokens %v granted to %v, want three grants, worker-1's first", rep.Tokens, rep.Holders)
	}
	for i := 1; i < len(rep.Tokens); i++ {
		if rep.Tokens[i] <= rep.Tokens[i-1] {
			t.Errorf("tokens not strictly increasing: %v", rep.Tokens)
		}
	}
	if rep.FailoverMS < demoTTL.Milliseconds()/2 {
		t.Errorf("failover %d ms: faster than the lease could have expired", rep.FailoverMS)
	}

	// The JSON report carries the documented fields.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"jobs", "processed", "duplicates", "lost", "fenced_refused", "failover_ms", "tokens"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON report lacks %q: %s", k, b)
		}
	}

	// The demo drops its tables from a database it was given.
	var n int
	if err := pgtest.PoolURL(t, url).QueryRow(ctx,
		"SELECT count(*) FROM pg_tables WHERE schemaname = 'leasehold_demo' AND tablename LIKE 'demo_%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d demo tables left behind", n)
	}
}

func TestReportViolations(t *testing.T) {
	good := report{Jobs: 2, Processed: 2, FencedRefused: 1, Tokens: []fence.Token{1, 5}, Balance: 3, ExpectedBalance: 3}
	if v := good.violations(); len(v) != 0 {
		t.Fatalf("good report: %v", v)
	}
	for name, r := range map[string]report{
		"duplicate":   {Duplicates: 1, FencedRefused: 1, Tokens: []fence.Token{1}},
		"lost":        {Lost: 1, FencedRefused: 1, Tokens: []fence.Token{1}},
		"not refused": {FencedRefused: 0, Tokens: []fence.Token{1}},
		"balance":     {FencedRefused: 1, Tokens: []fence.Token{1}, Balance: 1},
		"tokens":      {FencedRefused: 1, Tokens: []fence.Token{2, 2}},
	} {
		if v := r.violations(); len(v) == 0 {
			t.Errorf("%s: no violation found", name)
		}
	}
}
