package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// TestKafkaSuite runs the kafka suite tiny (kfake, 2000 records, one round)
// and checks the tables and the JSON report.
func TestKafkaSuite(t *testing.T) {
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	t.Setenv("KAFKA_BROKERS", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "kafka.json")
	var out bytes.Buffer
	err := runKafka(ctx, []string{"--records", "2000", "--partitions", "4", "--rounds", "1", "--handoffs", "1",
		"--markdown", "--json", path}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine: nproc", "| noop | franz-go | 2000 |", "| one-row | raw-sql | 2000 |",
		"| noop leasehold/franz-go |", "| leasehold-wait5s |"} {
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
		t.Fatal(err)
	}
	got := map[[2]string]Result{}
	for _, r := range rep.Results {
		got[[2]string{r.System, r.Case}] = r
	}
	for _, k := range [][2]string{{sysFranz, "noop"}, {sysKafkaLH, "noop"}, {sysKafkaRaw, "noop"}, {sysKafkaLH, "one-row"}, {sysKafkaRaw, "one-row"}} {
		if got[k].JobsPerSec <= 0 {
			t.Errorf("%v: no rate: %+v", k, got[k])
		}
	}
	for _, sys := range []string{sysKafkaLH, sysKafkaLHWait5} {
		if r := got[[2]string{sys, "handoff"}]; r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Errorf("handoff on %s: implausible %+v", sys, r)
		}
	}
	for _, k := range []string{"noop", "one-row", "noop/franz-go"} {
		if rep.Ratios[k] <= 0 {
			t.Errorf("ratio %s = %v", k, rep.Ratios[k])
		}
	}
}

func TestKafkaFlags(t *testing.T) {
	f, err := parseKafkaFlags([]string{"--records", "10"}, io.Discard)
	if err != nil || f.records != 10 || len(f.cases) != 3 {
		t.Fatalf("%+v %v", f, err)
	}
	for _, bad := range [][]string{{"--cases", "nope"}, {"--records", "0"}, {"--rounds", "0"}, {"--handoffs", "0"}, {"extra"}} {
		if _, err := parseKafkaFlags(bad, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
