package chaos

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// validBatch is validInput's three jobs as the items i-0..i-2 of a sealed
// batch, each completed once, the progress exact, and each follow-up
// enqueued once and run once, after every item's effect.
func validBatch() Input {
	in := validInput()
	at := ms(5000)
	in.Batch = &BatchRun{
		Submitted: []string{"i-0", "i-1", "i-2"},
		ItemKeys:  map[int64]string{1: "i-0", 2: "i-1", 3: "i-2"},
		Progress: queue.BatchInfo{ID: 1, Total: 3, Completed: 3, SealedAt: &at, FinishedAt: &at, SucceededAt: &at,
			CompleteJob: 10, SuccessJob: 11},
		FollowUpJobs: []FollowUpJob{{ID: 10, Which: FollowUpComplete, State: "completed"}, {ID: 11, Which: FollowUpSuccess, State: "completed"}},
		FollowUpRuns: []FollowUpRun{{N: 1, Job: 10, Which: FollowUpComplete, Token: 2, Worker: "w1", ItemsSeen: 3},
			{N: 2, Job: 11, Which: FollowUpSuccess, Token: 5, Worker: "w1", ItemsSeen: 3}},
	}
	return in
}

func TestCheckBatchPassesAValidRun(t *testing.T) {
	r := Check(validBatch())
	if r.Verdict != VerdictPass || len(r.Violations) != 0 {
		t.Fatalf("valid batch run: %+v", r)
	}
	if r.FollowupsExpected != 2 || r.FollowupsRun != 2 {
		t.Fatalf("follow-ups: expected %d, run %d; want 2 and 2", r.FollowupsExpected, r.FollowupsRun)
	}
	if r := Check(validInput()); r.FollowupsExpected+r.FollowupsRun+r.FollowupViolations+r.ProgressViolations != 0 {
		t.Fatalf("a queue run has batch counts: %+v", r)
	}
}

// Negative controls: each input breaks one of the batch's invariants,
// which must be flagged with its count and fail the run.
func TestCheckBatchFlagsEachViolation(t *testing.T) {
	followups := func(r Result) int { return r.FollowupViolations }
	progress := func(r Result) int { return r.ProgressViolations }
	for _, tc := range []struct {
		name   string
		change func(in *Input, b *BatchRun)
		count  func(Result) int
		want   string
	}{
		{"on-complete expected once, run never", func(_ *Input, b *BatchRun) {
			b.FollowUpRuns = b.FollowUpRuns[1:]
		}, followups, "on-complete follow-up ran 0 times, want 1"},
		{"on-complete expected once, run twice", func(_ *Input, b *BatchRun) {
			b.FollowUpRuns = append(b.FollowUpRuns, FollowUpRun{N: 3, Job: 10, Which: FollowUpComplete, Token: 7, ItemsSeen: 3})
		}, followups, "on-complete follow-up ran 2 times, want 1"},
		{"on-success run although an item failed", func(in *Input, b *BatchRun) {
			in.Jobs[2].State = "discarded"
			in.Ledger = in.Ledger[:1]
			in.Ledger = append(in.Ledger, Entry{N: 3, Job: 2, Key: "a", Partition: 0, Token: 2, Worker: "w1"})
			b.Progress.Completed, b.Progress.Failed = 2, 1
		}, followups, "on-success follow-up ran 1 times, want 0"},
		{"on-success enqueued twice", func(_ *Input, b *BatchRun) {
			b.FollowUpJobs = append(b.FollowUpJobs, FollowUpJob{ID: 12, Which: FollowUpSuccess, State: "completed"})
		}, followups, "on-success follow-up enqueued 2 times, want 1"},
		{"follow-up not completed", func(_ *Input, b *BatchRun) {
			b.FollowUpJobs[0].State = "pending"
		}, followups, "job 10 is pending at the end"},
		{"follow-up before the last item's effect", func(_ *Input, b *BatchRun) {
			b.FollowUpRuns[0].ItemsSeen = 2
		}, followups, "seeing 2 of 3 items' effects committed: before the last item"},
		{"total short", func(_ *Input, b *BatchRun) {
			b.Progress.Total = 2
		}, progress, "total 2, want 3"},
		{"an item counted twice", func(_ *Input, b *BatchRun) {
			b.Progress.Completed = 4
		}, progress, "completed 4, want 3"},
		{"an item not counted", func(_ *Input, b *BatchRun) {
			b.Progress.Completed, b.Progress.Pending = 2, 1
		}, progress, "pending at the end 1, want 0"},
		{"not finished", func(_ *Input, b *BatchRun) {
			b.Progress.FinishedAt = nil
		}, progress, "yet not finished"},
		{"not sealed", func(_ *Input, b *BatchRun) {
			b.Progress.SealedAt = nil
		}, progress, "not sealed"},
		{"follow-up job recorded wrong", func(_ *Input, b *BatchRun) {
			b.Progress.CompleteJob = 99
		}, progress, "records on-complete follow-up job 99"},
		{"submitted item missing", func(_ *Input, b *BatchRun) {
			b.Submitted = append(b.Submitted, "i-3")
		}, func(r Result) int { return r.Lost }, `item "i-3" submitted and acknowledged, not in the batch`},
		{"item never submitted", func(_ *Input, b *BatchRun) {
			b.Submitted = b.Submitted[:2]
		}, func(r Result) int { return r.Foreign }, "never submitted"},
		{"follow-up row of another job", func(_ *Input, b *BatchRun) {
			b.FollowUpRuns[0].Job = 77
		}, func(r Result) int { return r.Foreign }, "names job 77"},
	} {
		in := validBatch()
		tc.change(&in, in.Batch)
		r := Check(in)
		if r.Verdict != VerdictFail || tc.count(r) == 0 || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: verdict %q, count %d, violations %q; want fail mentioning %q",
				tc.name, r.Verdict, tc.count(r), r.Violations, tc.want)
		}
	}
}
