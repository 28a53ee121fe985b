package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// TestQueueSuite runs the queue suite tiny on a real server (500 jobs, 2
// partitions, one round) and checks the Markdown tables and the JSON report.
func TestQueueSuite(t *testing.T) {
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "queue.json")
	var out bytes.Buffer
	err := runQueue(ctx, []string{"--jobs", "500", "--partitions", "2", "--rounds", "1", "--keys", "50",
		"--markdown", "--json", path}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine: nproc", "| noop-burndown | leasehold | 500 |", "| tx-one-row | raw-sql | 100 |",
		"| case | ratio | target | verdict |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Markdown output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, b)
	}
	if rep.Suite != "queue" || rep.Rounds != 1 {
		t.Errorf("suite %q rounds %d, want queue 1", rep.Suite, rep.Rounds)
	}
	got := map[[2]string]Result{}
	for _, r := range rep.Results {
		got[[2]string{r.System, r.Case}] = r
	}
	for _, c := range queueCases {
		for _, sys := range []string{sysQueueLeasehold, sysQueueRaw} {
			r, ok := got[[2]string{sys, c}]
			switch {
			case !ok:
				t.Errorf("no result for %s on %s", c, sys)
			case r.JobsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms:
				t.Errorf("%s on %s: implausible %+v", c, sys, r)
			}
		}
		if rep.Ratios[c] <= 0 {
			t.Errorf("ratio for %s is %v", c, rep.Ratios[c])
		}
	}
	if len(rep.Results) != 2*len(queueCases) || len(rep.Ratios) != len(queueCases) {
		t.Errorf("%d results and %d ratios, want %d and %d", len(rep.Results), len(rep.Ratios), 2*len(queueCases), len(queueCases))
	}
}

// literal evaluates a string literal or a + of string literals.
func literal(e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			return strconv.Unquote(e.Value)
		}
	case *ast.ParenExpr:
		return literal(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, err := literal(e.X)
			if err != nil {
				return "", err
			}
			y, err := literal(e.Y)
			return x + y, err
		}
	}
	return "", fmt.Errorf("not a string literal: %T", e)
}

func TestQueueFlags(t *testing.T) {
	f, err := parseQueueFlags([]string{"--jobs", "1000", "--partitions", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.txJobs != 200 || f.conns != 4 || len(f.cases) != 2 || f.jobsOf("tx-one-row") != 200 || f.jobsOf("noop-burndown") != 1000 {
		t.Errorf("defaults: %+v", f)
	}
	for _, bad := range [][]string{{"--cases", "nope"}, {"--jobs", "0"}, {"--rounds", "0"}, {"--duration", "0s"}, {"extra"}} {
		if _, err := parseQueueFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
