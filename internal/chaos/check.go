package chaos

import (
	"fmt"
	"sort"
	"strings"

	"github.com/leasehold/leasehold/internal/history"
)

// Job is an enqueued job as the jobs table has it after the run.
type Job struct {
	ID        int64
	Key       string
	Partition int
	State     string // pending, completed, discarded, cancelled
}

// Entry is one ledger row: one application of a job's effect. N is the
// row's insertion order (a sequence drawn inside the applying transaction).
type Entry struct {
	N         int64
	Job       int64
	Key       string
	Partition int
	Token     int64
	Worker    string
}

// StoredOffset is a Kafka partition's stored offset at the end of a run,
// beside its log end.
type StoredOffset struct {
	// Key names the partition ("topic/partition"), as the Job keys do.
	Key string
	// Stored is the stored offset (the next record to apply); HasStored
	// is false when none is stored.
	Stored    int64
	HasStored bool
	// End is the partition's log end offset.
	End int64
}

// Input is what a run recorded, for Check.
type Input struct {
	// Confirmed are the ids whose enqueue was acknowledged to the feeder.
	Confirmed []int64
	// Jobs are the group's jobs as read from the jobs table at the end.
	Jobs []Job
	// Ledger is the ledger, in any order.
	Ledger []Entry
	// Events are the workers' histories (commit events are used).
	Events []Event
	// Audit is the database's lease history (internal/history).
	Audit []history.Version
	// Offsets are the stored offsets of the Kafka workload, one per
	// partition of the topic; nil for the queue workload.
	Offsets []StoredOffset
	// Batch is the batch workload's batch (its items are Jobs); nil for
	// the other workloads.
	Batch *BatchRun
	// Plain are the queue workload's plain jobs (also in Jobs), whose
	// handler's effect is outside the fence; PlainRuns their handler runs
	// (see checkPlain). Empty for the other workloads.
	Plain     []PlainJob
	PlainRuns []PlainRun
	// Output is the kafka-out workload's output topic (see checkOutput);
	// nil for the other workloads.
	Output *OutputRun
}

// Verdicts of a run.
const (
	// VerdictPass: no invariant failed and at least one stale commit was
	// refused, so the faults did exercise the fence.
	VerdictPass = "pass"
	// VerdictFail: an invariant failed.
	VerdictFail = "fail"
	// VerdictInconclusive: no invariant failed, but no stale commit was
	// refused either: the faults never put the fence to the test.
	VerdictInconclusive = "inconclusive"
)

// Result is the checker's part of a run's report.
type Result struct {
	Verdict string `json:"verdict"`
	// Jobs is how many jobs the run created.
	Jobs int `json:"jobs"`
	// Applied is how many distinct jobs have a ledger row.
	Applied int `json:"applied"`
	// Lost counts jobs without a ledger row at the end: acknowledged but
	// missing from the jobs table, finished without their effect, or never
	// finished (Unfinished of them).
	Lost       int `json:"lost"`
	Unfinished int `json:"unfinished"`
	// Foreign counts ledger rows of jobs the run does not know: its
	// bookkeeping broke.
	Foreign int `json:"foreign"`
	// Stray counts jobs that are not completed and yet have an effect in
	// the ledger: an effect that landed without its job's fenced
	// completion.
	Stray int `json:"stray"`
	// Duplicates counts jobs applied more than once; Extra the surplus rows.
	Duplicates int `json:"duplicates"`
	Extra      int `json:"extra_applications"`
	// StaleRefused counts commit attempts the fence refused (OutcomeFenced).
	StaleRefused int `json:"stale_refused"`
	// FencedApplied counts commit attempts the fence refused whose effect
	// (a ledger row of the job by the same worker under the same token)
	// is in the ledger nevertheless. Only queue commits name their job.
	FencedApplied int `json:"fenced_applied"`
	// StaleAccepted counts ledger rows written under a token older than
	// one that had already written to the same partition, or older than
	// another application of the same job: a stale owner's effect that
	// landed.
	StaleAccepted int `json:"stale_accepted"`
	// Overlaps counts overlapping ownership windows in the lease audit;
	// TokenViolations grants whose token did not strictly increase.
	Overlaps        int `json:"overlaps"`
	TokenViolations int `json:"token_violations"`
	// OrderViolations counts ledger rows of a key applied before an
	// earlier-enqueued job of the same key.
	OrderViolations int `json:"order_violations"`
	// OffsetMismatches counts Kafka partitions whose stored offset is not
	// their log end after the drain (or that have records and no stored
	// offset).
	OffsetMismatches int `json:"offset_mismatches"`
	// FollowupsExpected and FollowupsRun count the batch workload's
	// follow-up runs due (on complete once; on success once unless an item
	// failed) and committed; FollowupViolations counts follow-ups enqueued
	// or run other than once as due, not completed, or run before every
	// item's effect had committed. Batch workload only.
	FollowupsExpected  int `json:"followups_expected"`
	FollowupsRun       int `json:"followups_run"`
	FollowupViolations int `json:"followup_violations"`
	// ProgressViolations counts the batch's progress counters (total,
	// pending, completed, failed, cancelled) that differ from its items'
	// states in the jobs table or from the items submitted, and a batch not
	// sealed, finished or succeeded at the end as it should be. Batch
	// workload only.
	ProgressViolations int `json:"progress_violations"`
	// PlainCompleted counts the plain jobs completed (queue workload), and
	// PlainRuns their handler runs (at least one each; more are allowed:
	// the effect is outside the fence). PlainUnrun counts plain jobs
	// completed under a token that never ran them; PlainStale plain
	// completions recorded under a grant superseded by then (or never
	// granted); PlainExpired plain completions recorded more than
	// completeSlack after their grant's last recorded expiry;
	// PlainMisreported runs whose reported outcome contradicts the
	// recorded completion (reported completed under another token, or
	// reported fenced although recorded).
	PlainCompleted   int `json:"plain_completed"`
	PlainRuns        int `json:"plain_runs"`
	PlainUnrun       int `json:"plain_unrun"`
	PlainStale       int `json:"plain_stale"`
	PlainExpired     int `json:"plain_expired"`
	PlainMisreported int `json:"plain_misreported"`
	// Outputs counts the kafka-out workload's output records that a
	// read_committed reader reads; OutputsUncommitted those that a
	// read_uncommitted reader reads (records of aborted transactions
	// too; reported, not checked). OutputDuplicates counts input records
	// whose output was published more than once (OutputExtra the surplus
	// records), OutputMissing input records without an output,
	// OutputReordered outputs of a key published out of input order (or
	// to another output partition than the key's earlier ones), and
	// OutputForeign outputs naming no input record of the run, or under
	// another key than their input's. Kafka-out only.
	Outputs            int `json:"outputs"`
	OutputsUncommitted int `json:"outputs_uncommitted"`
	OutputDuplicates   int `json:"output_duplicates"`
	OutputExtra        int `json:"output_extra"`
	OutputMissing      int `json:"output_missing"`
	OutputReordered    int `json:"output_reordered"`
	OutputForeign      int `json:"output_foreign"`
	// RelayTransactions counts the Kafka transactions the relays committed
	// (the control: the sends it completed); RelayFenced the publishes a
	// newer producer of the partition refused (kafka.RelayStats.Fenced:
	// a stale relay's transaction refused); RelayFailed the publishes
	// that failed otherwise; RelayKills the relays killed (kill -9 of
	// their own process) right after a Kafka commit, before deleting what
	// it published; RelayPauses the workers stopped (SIGSTOP) by
	// themselves in a relay's transaction, before its commit. From the
	// workers' histories; kafka-out only.
	RelayTransactions int `json:"relay_transactions"`
	RelayFenced       int `json:"relay_fenced"`
	RelayFailed       int `json:"relay_failed"`
	RelayKills        int `json:"relay_kills"`
	RelayPauses       int `json:"relay_pauses"`
	// RelayRefused counts the stale relays' transactions Kafka refused,
	// as seen on the broker's side: producers (a transactional id at one
	// epoch) whose requests were answered PRODUCER_FENCED or
	// INVALID_PRODUCER_EPOCH, a newer owner's relay having initialised
	// the partition's transactional id; RelayRefusedRequests counts the
	// requests, and RelayRefusedBy those by request ("EndTxn (commit)",
	// "AddOffsetsToTxn", ...). Unlike RelayFenced, it also counts the
	// refusals a relay met after its grant had ended (it no longer counts
	// them itself). Kafka-out only.
	RelayRefused         int            `json:"relay_refused"`
	RelayRefusedRequests int            `json:"relay_refused_requests"`
	RelayRefusedBy       map[string]int `json:"relay_refused_by,omitempty"`
	// Commits counts commit attempts in the workers' histories; Grants the
	// grants in the lease audit.
	Commits int `json:"commits"`
	Grants  int `json:"grants"`
	// AppliedBy counts the ledger rows by worker.
	AppliedBy map[string]int `json:"applied_by"`
	// Violations describes the first violations found.
	Violations []string `json:"violations,omitempty"`
}

// maxViolations bounds Result.Violations.
const maxViolations = 20

// Check checks a run's record: every acknowledged job applied exactly
// once, no effect without its job's completion, no stale effect accepted,
// no effect of a commit the fence refused, each key's jobs applied in
// enqueue order, strictly increasing tokens and no overlapping ownership
// windows in the lease audit, (queue) each plain job's completion recorded
// once, fenced, and reported truthfully (checkPlain), (Kafka) every stored
// offset at its log end, (batch) the batch's items, progress and
// follow-ups (checkBatch), and (kafka-out) each input record's output
// published exactly once, in input order per key (checkOutput).
// It counts the stale commits refused; a run that refused none is
// inconclusive.
func Check(in Input) Result {
	var r Result
	flag := func(format string, a ...any) {
		if len(r.Violations) < maxViolations {
			r.Violations = append(r.Violations, fmt.Sprintf(format, a...))
		}
	}
	ledger := append([]Entry(nil), in.Ledger...)
	sort.Slice(ledger, func(i, j int) bool { return ledger[i].N < ledger[j].N })

	rows := map[int64][]Entry{}
	for _, e := range ledger {
		rows[e.Job] = append(rows[e.Job], e)
	}
	plain := make(map[int64]PlainJob, len(in.Plain))
	for _, p := range in.Plain {
		plain[p.ID] = p
	}
	known := map[int64]bool{}
	r.Jobs = len(in.Jobs)
	for _, j := range in.Jobs {
		known[j.ID] = true
	}
	for _, id := range in.Confirmed {
		if !known[id] {
			r.Lost++
			flag("job %d: production acknowledged, but missing from the jobs table or the topic's log", id)
		}
	}
	for _, j := range in.Jobs {
		n := len(rows[j.ID])
		if _, ok := plain[j.ID]; ok {
			// Its effect is in chaos_plain_runs, at least once (checkPlain).
			switch {
			case n > 0:
				r.Foreign++
				flag("job %d (key %s): a plain job, yet in the ledger", j.ID, j.Key)
			case j.State == "pending":
				r.Lost++
				r.Unfinished++
				flag("plain job %d (key %s): never completed, still pending at the end", j.ID, j.Key)
			case j.State != "completed":
				r.Lost++
				flag("plain job %d (key %s): %s, not completed", j.ID, j.Key, j.State)
			}
			continue
		}
		switch {
		case n == 0 && j.State == "pending":
			r.Lost++
			r.Unfinished++
			flag("job %d (key %s): never applied, still pending at the end", j.ID, j.Key)
		case n == 0:
			r.Lost++
			flag("job %d (key %s): %s without its effect", j.ID, j.Key, j.State)
		case n > 1:
			r.Duplicates++
			r.Extra += n - 1
			tokens := make([]string, n)
			for i, e := range rows[j.ID] {
				tokens[i] = fmt.Sprintf("%d by %s", e.Token, e.Worker)
			}
			flag("job %d (key %s): applied %d times (tokens %s)", j.ID, j.Key, n, strings.Join(tokens, ", "))
		}
		if n > 0 && j.State != "completed" {
			r.Stray++
			flag("job %d (key %s): %s, yet its effect is in the ledger", j.ID, j.Key, j.State)
		}
	}
	for id := range rows {
		if !known[id] {
			r.Foreign++
			flag("ledger: job %d is not a job of the run", id)
		}
	}
	r.Applied = len(rows)
	r.AppliedBy = map[string]int{}
	for _, e := range ledger {
		r.AppliedBy[e.Worker]++
	}

	// Stale effects: per partition, in insertion order, a token below the
	// highest one already written; per job, an application under a token
	// below another application's.
	stale := map[int64]bool{}
	high := map[int]int64{}
	for _, e := range ledger {
		if h, ok := high[e.Partition]; ok && e.Token < h {
			stale[e.N] = true
			flag("ledger row %d: job %d under token %d after partition %d saw token %d (stale write accepted)",
				e.N, e.Job, e.Token, e.Partition, h)
		}
		high[e.Partition] = max(high[e.Partition], e.Token)
	}
	for _, es := range rows {
		var top int64
		for _, e := range es {
			top = max(top, e.Token)
		}
		for _, e := range es {
			if e.Token < top && !stale[e.N] {
				stale[e.N] = true
				flag("ledger row %d: job %d under token %d, also applied under token %d (stale write accepted)",
					e.N, e.Job, e.Token, top)
			}
		}
	}
	r.StaleAccepted = len(stale)

	// Order: per key, job ids (enqueue order) increase in insertion order,
	// counting each job's first application only.
	last := map[string]int64{}
	seen := map[int64]bool{}
	for _, e := range ledger {
		if seen[e.Job] {
			continue
		}
		seen[e.Job] = true
		if l, ok := last[e.Key]; ok && e.Job < l {
			r.OrderViolations++
			flag("ledger row %d: key %s job %d applied after job %d", e.N, e.Key, e.Job, l)
		}
		last[e.Key] = max(last[e.Key], e.Job)
	}

	for _, ev := range in.Events {
		if ev.Type != EventCommit {
			continue
		}
		r.Commits++
		if ev.Outcome != "fenced" {
			continue
		}
		r.StaleRefused++
		for _, e := range rows[ev.Job] {
			if ev.Job != 0 && e.Worker == ev.Worker && e.Token == ev.Token {
				r.FencedApplied++
				flag("job %d: its commit by %s under token %d was refused, yet that run's effect is in the ledger (row %d)",
					ev.Job, ev.Worker, ev.Token, e.N)
				break
			}
		}
	}

	for _, o := range in.Offsets {
		switch {
		case !o.HasStored && o.End > 0:
			r.OffsetMismatches++
			flag("offsets: %s has no stored offset, its log ends at %d", o.Key, o.End)
		case o.HasStored && o.Stored != o.End:
			r.OffsetMismatches++
			flag("offsets: %s stored offset %d, its log ends at %d", o.Key, o.Stored, o.End)
		}
	}

	if len(plain) > 0 {
		checkPlain(in, plain, &r, flag)
	}
	if in.Batch != nil {
		checkBatch(in.Batch, in.Jobs, &r, flag)
	}
	if in.Output != nil {
		checkOutput(in.Output, in.Jobs, &r, flag)
	}
	countRelayEvents(in.Events, &r)

	h := history.Check(in.Audit)
	r.Grants = h.Grants
	for _, v := range h.Violations {
		if strings.Contains(v, "overlap") {
			r.Overlaps++
		} else {
			r.TokenViolations++
		}
		flag("lease audit: %s", v)
	}

	switch {
	case r.Lost+r.Foreign+r.Stray+r.Duplicates+r.FencedApplied+r.StaleAccepted+r.Overlaps+r.TokenViolations+r.OrderViolations+r.OffsetMismatches+
		r.FollowupViolations+r.ProgressViolations+r.PlainUnrun+r.PlainStale+r.PlainExpired+r.PlainMisreported+
		r.OutputDuplicates+r.OutputMissing+r.OutputReordered+r.OutputForeign > 0:
		r.Verdict = VerdictFail
	case r.StaleRefused == 0:
		r.Verdict = VerdictInconclusive
	default:
		r.Verdict = VerdictPass
	}
	return r
}
