package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
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
	checkReport(t, path, "queue", queueCases)
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
