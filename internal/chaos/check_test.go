package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/history"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// validInput is a run in which two jobs of key a and one of key b were
// applied once each, partition 0 changed hands (token 1 to 2) and the old
// owner's late commit was refused.
func validInput() Input {
	return Input{
		Confirmed: []int64{1, 2, 3},
		Jobs: []Job{
			{ID: 1, Key: "a", Partition: 0, State: "completed"},
			{ID: 2, Key: "a", Partition: 0, State: "completed"},
			{ID: 3, Key: "b", Partition: 1, State: "completed"},
		},
		Ledger: []Entry{
			{N: 1, Job: 1, Key: "a", Partition: 0, Token: 1, Worker: "w0"},
			{N: 2, Job: 3, Key: "b", Partition: 1, Token: 5, Worker: "w1"},
			{N: 3, Job: 2, Key: "a", Partition: 0, Token: 2, Worker: "w1"},
		},
		Events: []Event{
			{Type: EventCommit, Job: 1, Partition: 0, Token: 1, Outcome: "completed"},
			{Type: EventCommit, Job: 2, Partition: 0, Token: 1, Outcome: "fenced"},
			{Type: EventCommit, Job: 2, Partition: 0, Token: 2, Outcome: "completed"},
			{Type: EventCommit, Job: 3, Partition: 1, Token: 5, Outcome: "completed"},
		},
		Audit: []history.Version{
			{Seq: 1, Name: "partition/g/0", Owner: "w0#x", Token: 1, AcquiredAt: ms(0), ExpiresAt: ms(2000)},
			{Seq: 2, Name: "partition/g/1", Owner: "w1#y", Token: 5, AcquiredAt: ms(10), ExpiresAt: ms(2010)},
			{Seq: 3, Name: "partition/g/0", Owner: "w1#y", Token: 2, AcquiredAt: ms(2100), ExpiresAt: ms(4100)},
		},
	}
}

func TestCheckPassesAValidRun(t *testing.T) {
	r := Check(validInput())
	if r.Verdict != VerdictPass || len(r.Violations) != 0 {
		t.Fatalf("valid run: %+v", r)
	}
	if r.Jobs != 3 || r.Applied != 3 || r.StaleRefused != 1 || r.Commits != 4 || r.Grants != 3 {
		t.Fatalf("counts: %+v", r)
	}
	if r.AppliedBy["w0"] != 1 || r.AppliedBy["w1"] != 2 {
		t.Fatalf("applied by worker: %v", r.AppliedBy)
	}
}

func TestCheckWithoutRefusalsIsInconclusive(t *testing.T) {
	in := validInput()
	in.Events = slices.DeleteFunc(in.Events, func(e Event) bool { return e.Outcome == "fenced" })
	if r := Check(in); r.Verdict != VerdictInconclusive || r.StaleRefused != 0 {
		t.Fatalf("no refusal: verdict %q, refused %d; want inconclusive", r.Verdict, r.StaleRefused)
	}
}

// Negative controls: each input breaks one invariant, which must be
// flagged with its count and fail the run.
func TestCheckFlagsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Input)
		count  func(Result) int
		want   string
	}{
		{"duplicate", func(in *Input) {
			in.Ledger = append(in.Ledger, Entry{N: 4, Job: 3, Key: "b", Partition: 1, Token: 5, Worker: "w1"})
		}, func(r Result) int { return r.Duplicates }, "applied 2 times"},
		{"missing effect", func(in *Input) {
			in.Ledger = in.Ledger[:2]
		}, func(r Result) int { return r.Lost }, "completed without its effect"},
		{"unfinished", func(in *Input) {
			in.Ledger = in.Ledger[:2]
			in.Jobs[1].State = "pending"
		}, func(r Result) int { return r.Unfinished }, "still pending"},
		{"effect of a job not completed", func(in *Input) {
			in.Jobs[2].State = "pending"
		}, func(r Result) int { return r.Stray }, "pending, yet its effect is in the ledger"},
		{"refused commit applied", func(in *Input) {
			// The run of job 2 by w0 under token 1 was refused, and its
			// row is in the ledger all the same, beside the new owner's.
			in.Events[1].Worker = "w0"
			in.Ledger = append(in.Ledger, Entry{N: 4, Job: 2, Key: "a", Partition: 0, Token: 1, Worker: "w0"})
		}, func(r Result) int { return r.FencedApplied }, "was refused, yet that run's effect is in the ledger"},
		{"acknowledged job vanished", func(in *Input) {
			in.Confirmed = append(in.Confirmed, 9)
		}, func(r Result) int { return r.Lost }, "missing from the jobs table or the topic's log"},
		{"foreign ledger row", func(in *Input) {
			in.Ledger = append(in.Ledger, Entry{N: 4, Job: 77, Key: "z", Partition: 1, Token: 5})
		}, func(r Result) int { return r.Foreign }, "not a job of the run"},
		{"stale commit accepted", func(in *Input) {
			// The old owner (token 1) wrote job 2 after token 2 wrote in
			// partition 0; job 2 is then applied once, but stale.
			in.Ledger = []Entry{in.Ledger[0], in.Ledger[1],
				{N: 3, Job: 4, Key: "c", Partition: 0, Token: 2}, {N: 4, Job: 2, Key: "a", Partition: 0, Token: 1}}
			in.Jobs = append(in.Jobs, Job{ID: 4, Key: "c", State: "completed"})
		}, func(r Result) int { return r.StaleAccepted }, "stale write accepted"},
		{"stale duplicate", func(in *Input) {
			// A zombie's write lands before the new owner's, under the old token.
			in.Ledger = append(in.Ledger, Entry{N: 0, Job: 2, Key: "a", Partition: 0, Token: 1, Worker: "w0"})
		}, func(r Result) int { return r.StaleAccepted }, "also applied under token 2"},
		{"key order", func(in *Input) {
			in.Ledger[0].N, in.Ledger[2].N = 3, 1
			in.Ledger[0].Token, in.Ledger[2].Token = 2, 1
		}, func(r Result) int { return r.OrderViolations }, "applied after job"},
		{"overlapping ownership", func(in *Input) {
			in.Audit[2].AcquiredAt = ms(1000) // before token 1's window ended
		}, func(r Result) int { return r.Overlaps }, "overlap"},
		{"token reuse", func(in *Input) {
			in.Audit = append(in.Audit, history.Version{Seq: 4, Name: "partition/g/0", Owner: "w2#z", Token: 1,
				AcquiredAt: ms(5000), ExpiresAt: ms(7000)})
		}, func(r Result) int { return r.TokenViolations }, "granted"},
	} {
		in := validInput()
		tc.change(&in)
		r := Check(in)
		if r.Verdict != VerdictFail || tc.count(r) == 0 || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: verdict %q, count %d, violations %q; want fail mentioning %q",
				tc.name, r.Verdict, tc.count(r), r.Violations, tc.want)
		}
	}
}

func TestCheckBoundsTheViolationList(t *testing.T) {
	in := validInput()
	for i := range 50 {
		in.Ledger = append(in.Ledger, Entry{N: int64(10 + i), Job: 3, Key: "b", Partition: 1, Token: 5})
	}
	r := Check(in)
	if r.Extra != 50 || len(r.Violations) > maxViolations {
		t.Fatalf("extra %d, %d violations listed", r.Extra, len(r.Violations))
	}
}

func TestPercentiles(t *testing.T) {
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(100 - i) // 100 .. 1
	}
	if p50, p99, m := percentiles(v); p50 != 50 || p99 != 99 || m != 100 {
		t.Fatalf("percentiles = %d %d %d; want 50 99 100", p50, p99, m)
	}
	if p50, p99, m := percentiles(nil); p50 != 0 || p99 != 0 || m != 0 {
		t.Fatal("percentiles of nothing")
	}
}
