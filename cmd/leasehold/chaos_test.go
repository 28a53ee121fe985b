package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/chaos"
)

func TestChaosRejectsBadFlags(t *testing.T) {
	out, err := run(t, "chaos", "--faults", "pause,meteor")
	if !errors.Is(err, chaos.ErrInvalidConfig) || !strings.Contains(err.Error(), "meteor") {
		t.Fatalf("unknown fault: %v (output %q)", err, out)
	}
	out, err = run(t, "chaos", "--workload", "rabbitmq")
	if !errors.Is(err, chaos.ErrInvalidConfig) || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("unknown workload: %v (output %q)", err, out)
	}
	out, err = run(t, "chaos", "worker")
	if !errors.Is(err, chaos.ErrInvalidConfig) {
		t.Fatalf("worker without flags: %v (output %q)", err, out)
	}
}

func TestChaosHidesTheControlAndTheWorker(t *testing.T) {
	out, err := run(t, "chaos", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "unfenced") || strings.Contains(out, "worker") && strings.Contains(out, "Available Commands") {
		t.Fatalf("help shows the control or the worker command:\n%s", out)
	}
	for _, flag := range []string{"--duration", "--seed", "--json", "--faults", "--database-url", "--workload", "kafka", "kafka-out", "batch"} {
		if !strings.Contains(out, flag) {
			t.Errorf("help lacks %s", flag)
		}
	}
}

// The report printed and written as JSON carries the fields the issue
// names.
func TestChaosReportFields(t *testing.T) {
	rep := &chaos.Report{Result: chaos.Result{Verdict: chaos.VerdictPass, Jobs: 3, StaleRefused: 1},
		Faults: map[chaos.Kind]*chaos.FaultStats{chaos.Pause: {Injected: 1, RecoveryP99MS: 1500}}}
	var human, js bytes.Buffer
	printChaos(&human, rep)
	if !strings.Contains(human.String(), "PASS") || !strings.Contains(human.String(), "pause") {
		t.Fatalf("report:\n%s", human.String())
	}
	if err := writeChaosJSON(&js, "-", rep); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"jobs", "lost", "duplicates", "stale_refused", "stale_accepted", "overlaps", "recovery_p99_ms", "faults", "verdict"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if f, ok := m["faults"].(map[string]any)["pause"].(map[string]any); !ok || f["injected"] != 1.0 {
		t.Errorf("faults: %v", m["faults"])
	}
}

// A Kafka run's report counts records and shows the stored offsets' check.
func TestChaosReportKafka(t *testing.T) {
	rep := &chaos.Report{Workload: "kafka", Result: chaos.Result{Verdict: chaos.VerdictFail, Jobs: 7, OffsetMismatches: 2}}
	var human bytes.Buffer
	printChaos(&human, rep)
	out := human.String()
	if !strings.Contains(out, "kafka workload") || !strings.Contains(out, "records   ") ||
		!regexp.MustCompile(`stored offsets not at log end\s+2`).MatchString(out) {
		t.Fatalf("report:\n%s", out)
	}
}

// A kafka-out run's report counts records and shows the output's check
// and the relays' counts, in print, in JSON and in the error.
func TestChaosReportKafkaOut(t *testing.T) {
	rep := &chaos.Report{Workload: "kafka-out", Result: chaos.Result{Verdict: chaos.VerdictFail, Jobs: 7,
		Outputs: 9, OutputsUncommitted: 11, OutputDuplicates: 2, OutputExtra: 2, OutputMissing: 1, OutputReordered: 3,
		RelayTransactions: 5, RelayRefused: 4, RelayRefusedRequests: 6, RelayRefusedBy: map[string]int{"EndTxn (commit)": 6},
		RelayKills: 1, RelayPauses: 4}}
	var human, js bytes.Buffer
	printChaos(&human, rep)
	out := human.String()
	for _, re := range []string{`kafka-out workload`, `records\s+7`, `stored offsets not at log end\s+0`,
		`outputs \(read_committed\)\s+9 \(read_uncommitted: 11\)`, `outputs duplicated\s+2 \(2 extra records\)`,
		`outputs missing / reordered\s+1 / 3`, `stale relays refused by Kafka\s+4 \(6 requests: EndTxn \(commit\) 6; counted by the relays: 0\)`,
		`relays killed / paused\s+1 / 4`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("report lacks %s:\n%s", re, out)
		}
	}
	if err := writeChaosJSON(&js, "-", rep); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"outputs": 9, "outputs_uncommitted": 11, "output_duplicates": 2, "output_missing": 1,
		"output_reordered": 3, "relay_refused": 4, "relay_kills": 1, "relay_pauses": 4, "relay_transactions": 5} {
		if m[k] != want {
			t.Errorf("JSON %q = %v; want %v", k, m[k], want)
		}
	}
	if v := outputViolations(rep); !strings.Contains(v, "2 outputs duplicated, 1 missing, 3 reordered") {
		t.Errorf("error message: %q", v)
	}
	if v := outputViolations(&chaos.Report{Workload: "kafka"}); v != "" {
		t.Errorf("error message of a kafka run: %q", v)
	}
}

// A batch run's report counts items and shows the follow-ups and the
// progress check, in print and in JSON.
func TestChaosReportBatch(t *testing.T) {
	rep := &chaos.Report{Workload: "batch", Result: chaos.Result{Verdict: chaos.VerdictFail, Jobs: 9,
		FollowupsExpected: 2, FollowupsRun: 3, FollowupViolations: 1, ProgressViolations: 4}}
	var human, js bytes.Buffer
	printChaos(&human, rep)
	out := human.String()
	if !strings.Contains(out, "batch workload") || !strings.Contains(out, "items   ") ||
		!regexp.MustCompile(`follow-ups run / expected\s+3 / 2 \(1 violations\)`).MatchString(out) ||
		!regexp.MustCompile(`batch progress violations\s+4`).MatchString(out) {
		t.Fatalf("report:\n%s", out)
	}
	if err := writeChaosJSON(&js, "-", rep); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"followups_expected": 2, "followups_run": 3, "followup_violations": 1, "progress_violations": 4} {
		if m[k] != want {
			t.Errorf("JSON %q = %v; want %v", k, m[k], want)
		}
	}
}
