package chaos

import (
	"slices"

	"github.com/leasehold/leasehold/queue"
)

// The follow-ups of a batch, as the jobs table's followup column names
// them.
const (
	FollowUpComplete = "complete"
	FollowUpSuccess  = "success"
)

// BatchRun is what the batch workload recorded, for Check: the producer's
// side (the item keys it submitted and had acknowledged, the batch sealed),
// the batch's jobs and progress at the end, and the follow-ups' runs. The
// items themselves are Input.Jobs, their effects Input.Ledger.
type BatchRun struct {
	// Submitted are the item keys the producer submitted, each
	// acknowledged, before it sealed the batch.
	Submitted []string
	// ItemKeys are the item keys of the batch's jobs (Input.Jobs), by job
	// id, as the jobs table has them.
	ItemKeys map[int64]string
	// Progress is the batch as queue.Client.Batch read it at the end.
	Progress queue.BatchInfo
	// FollowUpJobs are the batch's follow-up jobs in the jobs table.
	FollowUpJobs []FollowUpJob
	// FollowUpRuns are the follow-ups' effects, one per run that
	// committed.
	FollowUpRuns []FollowUpRun
}

// FollowUpJob is a follow-up job as the jobs table has it after the run.
type FollowUpJob struct {
	ID    int64
	Which string // FollowUpComplete or FollowUpSuccess
	State string
}

// FollowUpRun is one follow-up ledger row: one run of a follow-up's
// handler whose effect committed.
type FollowUpRun struct {
	N      int64
	Job    int64
	Which  string
	Token  int64
	Worker string
	// ItemsSeen is how many items' effects the run's statement saw
	// committed: all of them, if it ran after the batch's last item.
	ItemsSeen int64
}

// checkBatch checks a batch run (see Check): every submitted item in the
// batch once (a missing one is lost, one not submitted foreign); the
// batch's progress counters equal to its items' states in the jobs table,
// with every submitted item counted, none pending, the batch sealed and
// finished; each follow-up enqueued and run exactly as often as expected
// (on complete once; on success once unless an item was discarded or
// cancelled), and only after every item's effect had committed.
func checkBatch(b *BatchRun, jobs []Job, r *Result, flag func(string, ...any)) {
	// The item set: the producer's acknowledged keys against the jobs.
	jobsOf := map[string]int{}
	for _, k := range b.ItemKeys {
		jobsOf[k]++
	}
	submitted := map[string]bool{}
	for _, k := range b.Submitted {
		if submitted[k] {
			continue
		}
		submitted[k] = true
		switch n := jobsOf[k]; {
		case n == 0:
			r.Lost++
			flag("batch: item %q submitted and acknowledged, not in the batch", k)
		case n > 1:
			r.ProgressViolations++
			flag("batch: item %q is %d jobs", k, n)
		}
	}
	for id, k := range b.ItemKeys {
		if !submitted[k] {
			r.Foreign++
			flag("batch: job %d has item key %q, which the producer never submitted", id, k)
		}
	}

	// Progress: the counters against the items' states.
	states := map[string]int64{}
	for _, j := range jobs {
		states[j.State]++
	}
	p := b.Progress
	want := int64(len(submitted))
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"total", p.Total, want},
		{"total (the batch's jobs)", p.Total, int64(len(jobs))},
		{"pending", p.Pending, states["pending"]},
		{"completed", p.Completed, states["completed"]},
		{"failed", p.Failed, states["discarded"]},
		{"cancelled", p.Cancelled, states["cancelled"]},
		{"pending at the end", p.Pending, 0},
	} {
		if c.got != c.want {
			r.ProgressViolations++
			flag("batch progress: %s %d, want %d", c.what, c.got, c.want)
		}
	}
	succeeded := states["discarded"]+states["cancelled"] == 0
	switch {
	case !p.Sealed():
		r.ProgressViolations++
		flag("batch: not sealed at the end, though the producer sealed it")
	case p.FinishedAt == nil && p.Pending == 0:
		r.ProgressViolations++
		flag("batch: sealed with no item pending, yet not finished")
	case p.SucceededAt == nil && p.Pending == 0 && succeeded:
		r.ProgressViolations++
		flag("batch: every item completed, yet not succeeded")
	}

	// Follow-ups: enqueued and run as often as expected.
	expected := map[string]int{FollowUpComplete: 1, FollowUpSuccess: 0}
	if succeeded {
		expected[FollowUpSuccess] = 1
	}
	recorded := map[string]int64{FollowUpComplete: p.CompleteJob, FollowUpSuccess: p.SuccessJob}
	enqueued := map[string][]FollowUpJob{}
	for _, f := range b.FollowUpJobs {
		enqueued[f.Which] = append(enqueued[f.Which], f)
	}
	runs := map[string]int{}
	for _, f := range b.FollowUpRuns {
		runs[f.Which]++
	}
	r.FollowupsExpected, r.FollowupsRun = 0, len(b.FollowUpRuns)
	for _, which := range []string{FollowUpComplete, FollowUpSuccess} {
		r.FollowupsExpected += expected[which]
		if n := len(enqueued[which]); n != expected[which] {
			r.FollowupViolations++
			flag("batch: on-%s follow-up enqueued %d times, want %d", which, n, expected[which])
		}
		for _, f := range enqueued[which] {
			if f.State != "completed" {
				r.FollowupViolations++
				flag("batch: on-%s follow-up job %d is %s at the end", which, f.ID, f.State)
			}
			if recorded[which] != f.ID {
				r.ProgressViolations++
				flag("batch: records on-%s follow-up job %d, the jobs table has job %d", which, recorded[which], f.ID)
			}
		}
		if runs[which] != expected[which] {
			r.FollowupViolations++
			flag("batch: on-%s follow-up ran %d times, want %d", which, runs[which], expected[which])
		}
	}
	for which := range runs {
		if !slices.Contains([]string{FollowUpComplete, FollowUpSuccess}, which) {
			r.FollowupViolations++
			flag("batch: a follow-up %q ran, which the batch does not have", which)
		}
	}
	for _, f := range b.FollowUpRuns {
		if !slices.ContainsFunc(enqueued[f.Which], func(j FollowUpJob) bool { return j.ID == f.Job }) {
			r.Foreign++
			flag("batch: follow-up ledger row %d names job %d, not the batch's on-%s follow-up", f.N, f.Job, f.Which)
		}
		if f.ItemsSeen < want {
			r.FollowupViolations++
			flag("batch: on-%s follow-up (job %d, token %d by %s) ran seeing %d of %d items' effects committed: before the last item",
				f.Which, f.Job, f.Token, f.Worker, f.ItemsSeen, want)
		}
	}
}
