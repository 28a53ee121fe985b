package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/demo"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// The demo, run with --json against a database of its own, tells its story
// on stderr and prints a report on stdout in which every invariant holds:
// each job applied exactly once, the paused worker's late commits refused,
// and both takeovers measured.
func TestDemo(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
	if jobs := num("jobs"); jobs < demo.Jobs || num("applied") != jobs {
		t.Errorf("jobs %v, applied %v", jobs, num("applied"))
	}
	for _, k := range []string{"duplicates", "lost", "unfinished", "stray", "order_violations", "stale_accepted", "fenced_applied", "overlaps", "token_violations"} {
		if v := num(k); v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	if num("refused") < 1 || num("stale_refused") < 1 {
		t.Errorf("refused %v, stale_refused %v; want at least 1", num("refused"), num("stale_refused"))
	}
	if num("failover_ms") <= 0 || num("pause_takeover_ms") <= 0 {
		t.Errorf("failover_ms %v, pause_takeover_ms %v: not measured", num("failover_ms"), num("pause_takeover_ms"))
	}
	if num("grants") < demo.Partitions {
		t.Errorf("%v grants for %d partitions", num("grants"), demo.Partitions)
	}
	if ok, _ := rep["ok"].(bool); !ok || rep["verdict"] != "pass" {
		t.Errorf("ok %v, verdict %v; violations %v", rep["ok"], rep["verdict"], rep["violations"])
	}
	for _, want := range []string{"CRASHES", "FAILOVER", "PAUSES", "TAKEOVER", "REFUSED", "owners"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the story lacks %q", want)
		}
	}
}

// demo --kafka --json prints the Kafka story's report as the last line.
func TestDemoKafkaJSON(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.URL(t))
	out, err := runDemo(t, "demo", "--kafka", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n") // runDemo merges the story (stderr) into out
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"story", "jobs", "applied", "duplicates", "lost", "offset_mismatches", "refused", "pause_takeover_ms", "ok"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if m["story"] != "kafka" || m["ok"] != true {
		t.Errorf("story %v, ok %v; violations %v", m["story"], m["ok"], m["violations"])
	}
}

// The demo's exit status fails when the checker finds a violation: the
// hidden unfenced control applies effects outside the fence, and the
// command must report the duplicates and fail.
func TestDemoFailsWhenTheCheckerFindsViolations(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.URL(t))
	out, err := runDemo(t, "demo", "--kafka", "--unfenced")
	if err == nil || !strings.Contains(err.Error(), "invariants violated") {
		t.Fatalf("the unfenced demo did not fail: %v\n%s", err, out)
	}
	if !strings.Contains(out, "VIOLATED: ") || !strings.Contains(out, "applied 2 times") {
		t.Errorf("the report does not show the duplicates:\n%s", out)
	}
}

// runDemo is run with room for a demo on a loaded machine.
func runDemo(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

var demoUIURL = regexp.MustCompile(`The web UI serves the demo's database at (http://\S+/) \(read-only\)`)

// demo --ui serves the web UI on the demo's database during the story,
// and after the report until interrupted (the final state: every job
// completed); an interrupt then ends it with status 0.
func TestDemoUI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := &logtest.Buffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, []string{"demo", "--ui", "--ui-addr", "127.0.0.1:0", "--database-url", pgtest.URL(t)},
			strings.NewReader(""), out, out)
	}()
	base := waitOutput(t, out, demoUIURL, exited, 2*time.Minute)
	// During the story: the ownership map of the demo's group.
	code, body := get(t, base+"groups/"+demo.Group)
	if code != http.StatusOK || !strings.Contains(body, `data-partition="0"`) {
		t.Errorf("GET groups/%s during the demo: %d, without partition rows:\n%s", demo.Group, code, body)
	}
	waitOutput(t, out, regexp.MustCompile(`(The web UI still serves the final state at )`+regexp.QuoteMeta(base)), exited, 3*time.Minute)
	if !strings.Contains(out.String(), "All invariants hold") {
		t.Errorf("no report before the UI holds:\n%s", out)
	}
	code, body = get(t, base+"jobs?group="+demo.Group+"&state=pending")
	if code != http.StatusOK || strings.Contains(body, `data-job="`) {
		t.Errorf("GET the pending jobs after the demo: %d, or some listed:\n%s", code, body)
	}
	code, body = get(t, base+"jobs?group="+demo.Group+"&state=completed")
	if code != http.StatusOK || !strings.Contains(body, `data-job="`) {
		t.Errorf("GET the completed jobs after the demo: %d, none listed:\n%s", code, body)
	}
	cancel() // as SIGINT does
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit status %d after the interrupt:\n%s", code, out)
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not end after the interrupt")
	}
	if strings.Count(out.String(), "Report (the chaos checker's") != 1 {
		t.Errorf("the report is not printed once:\n%s", out)
	}
}

// The UI's flags need --ui.
func TestDemoUIFlagsNeedUI(t *testing.T) {
	_, err := runDemo(t, "demo", "--ui-addr", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "--ui-addr without --ui") {
		t.Errorf("--ui-addr without --ui: %v", err)
	}
}
