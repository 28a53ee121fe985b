package chaos

import (
	"strings"
	"testing"
)

// plainInput is validInput with a plain job (5, key p, partition 0): run
// twice (by w0 under token 1, whose completion was refused, then by w1
// under token 2) and completed once, under token 2, inside its grant.
func plainInput() Input {
	in := validInput()
	in.Confirmed = append(in.Confirmed, 5)
	in.Jobs = append(in.Jobs, Job{ID: 5, Key: "p", Partition: 0, State: "completed"})
	in.Plain = []PlainJob{{ID: 5, FinishedToken: 2, FinishedAt: ms(2500)}}
	in.PlainRuns = []PlainRun{
		{N: 1, Job: 5, Partition: 0, Token: 1, Worker: "w0"},
		{N: 2, Job: 5, Partition: 0, Token: 2, Worker: "w1"},
	}
	in.Events = append(in.Events,
		Event{Type: EventCommit, Worker: "w0", Job: 5, Partition: 0, Token: 1, Outcome: "fenced"},
		Event{Type: EventCommit, Worker: "w1", Job: 5, Partition: 0, Token: 2, Outcome: "completed"})
	return in
}

// A plain job run twice (its effect is outside the fence) and completed
// once, under a current grant, passes; its runs are counted, not flagged.
func TestCheckPassesAPlainJobRunTwiceCompletedOnce(t *testing.T) {
	r := Check(plainInput())
	if r.Verdict != VerdictPass || len(r.Violations) != 0 {
		t.Fatalf("valid run with a plain job: %+v", r)
	}
	if r.PlainCompleted != 1 || r.PlainRuns != 2 || r.Lost != 0 || r.Duplicates != 0 {
		t.Fatalf("counts: %+v", r)
	}
}

// Negative controls for the plain jobs: each input breaks one guarantee
// of the plain handler's fenced completion, which must be flagged with its
// count and fail the run.
func TestCheckFlagsEachPlainViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Input)
		count  func(Result) int
		want   string
	}{
		{"never completed", func(in *Input) {
			in.Jobs[3].State = "pending"
			in.Plain[0] = PlainJob{ID: 5}
		}, func(r Result) int { return r.Unfinished }, "never completed"},
		{"completed by a token that never ran it", func(in *Input) {
			in.PlainRuns = in.PlainRuns[:1]
		}, func(r Result) int { return r.PlainUnrun }, "which never ran it"},
		{"stale completion accepted (token condition dropped)", func(in *Input) {
			// w0's completion under token 1 landed after token 2 took the
			// partition at 2100 ms; w1's completion then changed nothing
			// and was reported completed.
			in.Plain[0] = PlainJob{ID: 5, FinishedToken: 1, FinishedAt: ms(2200)}
			in.Events[4].Outcome = "completed"
		}, func(r Result) int { return r.PlainStale }, "stale completion accepted"},
		{"completion under an expired grant (liveness condition dropped)", func(in *Input) {
			// Token 2's lease expired at 4100 ms, nobody took over, and the
			// completion committed at 6000 ms.
			in.Plain[0].FinishedAt = ms(6000)
		}, func(r Result) int { return r.PlainExpired }, "whose lease expired"},
		{"reported fenced, yet recorded", func(in *Input) {
			in.Events[5].Outcome = "fenced"
		}, func(r Result) int { return r.PlainMisreported }, "reported its completion under token 2 fenced"},
		{"reported completed under another token", func(in *Input) {
			in.Events[4].Outcome = "completed"
		}, func(r Result) int { return r.PlainMisreported }, "reported it completed under token 1"},
		{"completed under a token never granted", func(in *Input) {
			in.Plain[0].FinishedToken = 9
			in.PlainRuns[1].Token = 9
			in.Events[5].Token = 9
		}, func(r Result) int { return r.PlainStale }, "never granted for partition 0"},
		{"plain job in the ledger", func(in *Input) {
			in.Ledger = append(in.Ledger, Entry{N: 4, Job: 5, Key: "p", Partition: 0, Token: 2, Worker: "w1"})
		}, func(r Result) int { return r.Foreign }, "a plain job, yet in the ledger"},
	} {
		in := plainInput()
		tc.change(&in)
		r := Check(in)
		if r.Verdict != VerdictFail || tc.count(r) == 0 || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: verdict %q, count %d, violations %q; want fail mentioning %q",
				tc.name, r.Verdict, tc.count(r), r.Violations, tc.want)
		}
	}
}
