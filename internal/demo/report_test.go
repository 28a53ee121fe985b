package demo

import (
	"testing"

	"github.com/leasehold/leasehold/internal/chaos"
)

// The negative controls of the story's own checks: each breaks one, which
// must fail the report.
func TestReportFlagsEachViolation(t *testing.T) {
	good := Report{Story: "queue", Result: chaos.Result{Verdict: chaos.VerdictPass, Jobs: 3, Applied: 3, StaleRefused: 2, Grants: 3},
		FailoverMS: 2100, PauseTakeoverMS: 2300, Refused: 1}
	r := good
	if r.check(); !r.OK || len(r.Violations) != 0 {
		t.Fatalf("good report: %q", r.Violations)
	}
	for name, bad := range map[string]func(*Report){
		"checker failed": func(r *Report) {
			r.Verdict, r.Duplicates, r.Result.Violations = chaos.VerdictFail, 1, []string{"job 1: applied 2 times"}
		},
		"failed without a reason": func(r *Report) { r.Verdict = chaos.VerdictFail },
		"inconclusive":            func(r *Report) { r.Verdict, r.StaleRefused = chaos.VerdictInconclusive, 0 },
		"nothing fed":             func(r *Report) { r.Jobs, r.Applied = 0, 0 },
		"not all applied":         func(r *Report) { r.Applied = 2 },
		"zombie not refused":      func(r *Report) { r.Refused = 0 },
		"no failover":             func(r *Report) { r.FailoverMS = 0 },
		"no takeover":             func(r *Report) { r.PauseTakeoverMS = 0 },
		"no grants":               func(r *Report) { r.Grants = 0 },
	} {
		r := good
		bad(&r)
		if r.check(); r.OK || len(r.Violations) == 0 {
			t.Errorf("%s: no violation found", name)
		}
	}
	kafka := good
	kafka.Story, kafka.FailoverMS = "kafka", 0 // the Kafka story has no crash
	if kafka.check(); !kafka.OK {
		t.Errorf("a Kafka report without a failover: %q", kafka.Violations)
	}
}
