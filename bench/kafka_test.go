package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/internal/store"
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
		"--outbox-records", "2000", "--outbox-rate", "200", "--outbox-trickle", "1s", "--outbox-idle", "500ms",
		"--markdown", "--json", path}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine: nproc", "| noop | franz-go | 2000 |", "| one-row | raw-sql | 2000 |",
		"| noop leasehold/franz-go |", "| leasehold-wait5s |", "| relay | 2000 |", "| franz-go-txn (4 producers) | 2000 |",
		"| relay / franz-go-txn (4 producers) |", "| relay | 200 |", "| idle, per second | relay | 0.0000 | 0.0000 | 0.0 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Markdown output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var js kafkaReport
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	rep := js.Report
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
	for _, k := range []string{"noop", "one-row", "noop/franz-go", "outbox/franz-go-txn", "outbox/franz-go-txn-1"} {
		if rep.Ratios[k] <= 0 {
			t.Errorf("ratio %s = %v", k, rep.Ratios[k])
		}
	}
	// The outbox cases: every system published every record (each
	// measurement fails on a missing or duplicated record), and the
	// relay's statements were counted.
	for _, c := range []string{caseOutbox, caseOutboxTrickle} {
		for _, sys := range []string{sysRelay, sysTxn, sysTxn1} {
			r := got[[2]string{sys, c}]
			if r.JobsPerSec <= 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
				t.Errorf("%s on %s: implausible %+v", c, sys, r)
			}
		}
	}
	if js.Outbox == nil {
		t.Fatal("no outbox report")
	}
	for _, k := range []string{"relay/outbox", "relay/outbox-trickle", "franz-go-txn/outbox", "franz-go-txn-1/outbox-trickle"} {
		runs := js.Outbox.Runs[k]
		if len(runs) != 1 || runs[0].Records == 0 || runs[0].Txns == 0 || runs[0].Requests == 0 {
			t.Errorf("outbox run %s: %+v", k, runs)
		}
	}
	if statementsLoaded(t) {
		drain := js.Outbox.Statements["drain"]
		if drain["read"].Calls.Median <= 0 || drain["delete"].Calls.Median <= 0 || drain["read"].Rows.Median < 1 {
			t.Errorf("drain statements per record: %+v", drain)
		}
		if idle := js.Outbox.Statements["idle"]; idle["relay"].Calls.Max != 0 {
			t.Errorf("the idle relay ran statements: %+v", idle)
		}
	}
}

// statementsLoaded reports whether the kafka suite's server counts
// statements: its throwaway cluster does; a DATABASE_URL server only with
// pg_stat_statements loaded.
func statementsLoaded(t *testing.T) bool {
	u := os.Getenv(envURL)
	if u == "" {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var libs string
	if err := conn.QueryRow(ctx, "SELECT current_setting('shared_preload_libraries')").Scan(&libs); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(libs, "pg_stat_statements")
}

// The statement names come from the outbox statements' texts, whatever
// constants and parameters pg_stat_statements replaced.
func TestOutboxStatementNames(t *testing.T) {
	st, err := store.For("")
	if err != nil {
		t.Fatal(err)
	}
	names := outboxNames(st.Outbox)
	o := st.Outbox
	for q, want := range map[string]string{o.Head: "head", o.Read: "read", o.ReadSegment: "read-segment", o.Delete: "delete",
		o.Append: "append", o.Seal: "seal", st.Lease.Check: ""} {
		// As pg_stat_statements keeps it: constants replaced by parameters
		// numbered after the statement's own.
		kept := regexp.MustCompile(`([^$\w])\d+(\.\d+)?(e\d+)?\b`).ReplaceAllString(q, "${1}$$99")
		kept = regexp.MustCompile(`\bfalse\b`).ReplaceAllString(kept, "$$98")
		kept = strings.ReplaceAll(kept, "extract(epoch FROM", "extract($97 FROM")
		if got := names[normSQL(kept)]; got != want {
			t.Errorf("%q named %q, want %q", kept, got, want)
		}
	}
	if len(names) < 6 {
		t.Errorf("%d statement names: %v", len(names), names)
	}
}

// The output checker catches a duplicate, a missing record, a record of
// another run and a changed value.
func TestOutboxWatcherVerdict(t *testing.T) {
	rec := func(n int) *kgo.Record {
		return bareRecord("t", n)
	}
	newW := func() *watcher { return &watcher{want: 3, seen: make([]time.Time, 3), all: make(chan struct{})} }
	w := newW()
	for n := range 3 {
		w.add(rec(n), time.Now())
	}
	if err := w.verdict(); err != nil {
		t.Fatalf("a correct output refused: %v", err)
	}
	changed := rec(1)
	changed.Value = []byte("other")
	for name, recs := range map[string][]*kgo.Record{
		"duplicate": {rec(0), rec(1), rec(2), rec(1)},
		"missing":   {rec(0), rec(2)},
		"foreign":   {rec(0), rec(1), rec(2), rec(7)},
		"changed":   {rec(0), changed, rec(2)},
	} {
		w := newW()
		for _, r := range recs {
			w.add(r, time.Now())
		}
		if err := w.verdict(); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}
