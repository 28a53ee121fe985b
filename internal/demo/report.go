package demo

import (
	"fmt"

	"github.com/leasehold/leasehold/internal/chaos"
)

// Report is the outcome of a run: the engine checker's Result, read from
// the database and the members' histories at the end, and the story's
// measurements.
type Report struct {
	// Story is "queue" or "kafka".
	Story string `json:"story"`
	chaos.Result
	// FailoverMS is the time from worker-1's crash until the survivors
	// held every partition (the queue story).
	FailoverMS int64 `json:"failover_ms"`
	// PauseTakeoverMS is the time from the pause until the other workers
	// held every partition.
	PauseTakeoverMS int64 `json:"pause_takeover_ms"`
	// Refused counts the paused worker's late commits that the fence
	// refused.
	Refused int `json:"refused"`
	// Tokens lists each partition's grants' tokens in grant order.
	Tokens map[int][]int64 `json:"tokens"`
	// Seconds is the run's duration, cluster start-up included.
	Seconds float64 `json:"seconds"`
	// UI is the web UI's URL, with Config.UIAddr ("" without).
	UI string `json:"ui,omitempty"`
	// OK reports whether every invariant held.
	OK bool `json:"ok"`
	// Violations describe the invariants that failed: the checker's, then
	// the story's.
	Violations []string `json:"violations"`
}

// check fills Violations and OK: the checker must pass, and the story must
// have happened as told.
func (r *Report) check() {
	v := append([]string{}, r.Result.Violations...)
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	switch {
	case r.Verdict == chaos.VerdictInconclusive:
		bad("no stale commit refused: the pause never put the fence to the test")
	case r.Verdict != chaos.VerdictPass && len(r.Result.Violations) == 0:
		bad("the checker's verdict is %q", r.Verdict)
	}
	if r.Jobs == 0 {
		bad("nothing fed")
	}
	if r.Applied != r.Jobs {
		bad("%d of %d applied", r.Applied, r.Jobs)
	}
	if r.Refused < 1 {
		bad("the paused worker's late commits were not refused")
	}
	if r.PauseTakeoverMS <= 0 || (r.Story == "queue" && r.FailoverMS <= 0) {
		bad("takeover not measured (failover %d ms, pause takeover %d ms)", r.FailoverMS, r.PauseTakeoverMS)
	}
	if r.Grants == 0 {
		bad("no lease grants in the audit")
	}
	r.Violations, r.OK = v, len(v) == 0
}
