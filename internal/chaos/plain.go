package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/queue"
)

// The queue workload's plain jobs. A plain (non-transactional) handler's
// effect is not in the fenced transaction: it runs on its own autocommit
// statement, appending a row to chaos_plain_runs, and a stale owner's run
// may apply it again. What the fence guarantees for such a job is its
// completion: recorded once, by the fenced completion statement, only
// while the run's grant is current and live. So the checker asserts, for
// each plain job (checkPlain):
//
//   - it completed, and under the token of one of its recorded runs;
//   - its completion (finished_at, database clock) came before any newer
//     grant of its partition started, and no later than completeSlack
//     after its own grant's last recorded expiry (the lease audit);
//   - the workers' reports agree with the row: a run reported completed
//     carries the recorded finished_token, and a run reported fenced does
//     not (a grant, once refused, never commits).
//
// Not guaranteed, and not checked: how many times the effect ran (at
// least once; more after a stall, a crash or a refused completion), and
// the order of the effects of a key's jobs (a stale run's effect may land
// after a newer owner's).

// plainItem is the queue workload's plain job: the seq-th job of its key.
type plainItem struct {
	Seq int `json:"seq"`
}

// Kind names the job kind.
func (plainItem) Kind() string { return plainKind }

// plainKind is the plain jobs' kind.
const plainKind = "chaos.plain"

// plainKey reports whether the queue workload's key k gets plain jobs:
// one key in four (every job of a key is of one kind), none when
// env.NoPlain.
func plainKey(env Env, k int) bool { return !env.NoPlain && k%4 == 3 }

// completeSlack is how long after its grant's last recorded expiry a
// completion's finished_at may be: the fenced completion statement checks
// the lease when it locks the row, and reads the clock for finished_at a
// moment later, in the same statement; a release committed meanwhile (it
// does not wait for the completion's lock) also ends the grant's window.
const completeSlack = time.Second

// PlainJob is a plain job's completion as the jobs table has it.
type PlainJob struct {
	ID int64
	// FinishedToken is the token of the grant whose completion was
	// recorded; 0 if none.
	FinishedToken int64
	// FinishedAt is when it was recorded, on the database clock.
	FinishedAt time.Time
}

// PlainRun is one run of a plain handler's effect (a row of
// chaos_plain_runs): at least one per job.
type PlainRun struct {
	N         int64
	Job       int64
	Partition int
	Token     int64
	Worker    string
}

// handlePlain registers the plain handler: a run may stall (past the TTL,
// ignoring its context), then records its effect on its own autocommit
// statement, outside any fence, and passes the Hold hook. The control
// (Unfenced) changes nothing here: the effect is unfenced anyway.
func handlePlain(ws *queue.Workers, db *pgxpool.Pool, w WorkerEnv, q queries) {
	queue.Handle(ws, func(ctx context.Context, j *queue.Work[plainItem]) error {
		if ok, d := w.Stall(); ok {
			time.Sleep(d) // ignoring the context: a stuck call, a GC pause
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := db.Exec(actx, q.plainApply, j.ID, j.Key, j.Partition, int64(j.Token), w.ID); err != nil {
			return err
		}
		hold(w, HandlerRun{Job: j.ID, Partition: j.Partition, Token: int64(j.Token)})
		return nil
	})
}

// partitionOf reads the partition number of a partition lease's name.
func partitionOf(name string) (int, bool) {
	i := strings.LastIndexByte(name, '/')
	if !strings.HasPrefix(name, "partition/") || i < 0 {
		return 0, false
	}
	p, err := strconv.Atoi(name[i+1:])
	return p, err == nil
}

// checkPlain checks the plain jobs (see the top of this file). plain are
// the plain jobs by id, jobs the run's jobs (their partition and state).
func checkPlain(in Input, plain map[int64]PlainJob, r *Result, flag func(string, ...any)) {
	runs := map[int64]map[int64]bool{} // job: tokens it ran under
	for _, run := range in.PlainRuns {
		if runs[run.Job] == nil {
			runs[run.Job] = map[int64]bool{}
		}
		runs[run.Job][run.Token] = true
		r.PlainRuns++
	}
	grants := map[int][]history.Grant{} // by partition, in write order
	for name, gs := range history.Grants(in.Audit) {
		if p, ok := partitionOf(name); ok {
			grants[p] = append(grants[p], gs...)
		}
	}
	audited := len(in.Audit) > 0
	for _, j := range in.Jobs {
		pj, ok := plain[j.ID]
		if !ok || j.State != "completed" {
			continue
		}
		r.PlainCompleted++
		if pj.FinishedToken == 0 {
			r.PlainStale++
			flag("plain job %d: completed without a finished_token", j.ID)
			continue
		}
		if !runs[j.ID][pj.FinishedToken] {
			r.PlainUnrun++
			flag("plain job %d: completed under token %d, which never ran it", j.ID, pj.FinishedToken)
		}
		if !audited {
			continue
		}
		gs := grants[j.Partition]
		i := -1
		for k, g := range gs {
			if g.Token == pj.FinishedToken {
				i = k
				break
			}
		}
		switch {
		case i < 0:
			r.PlainStale++
			flag("plain job %d: completed under token %d, never granted for partition %d", j.ID, pj.FinishedToken, j.Partition)
			continue
		case pj.FinishedAt.Before(gs[i].Start):
			r.PlainStale++
			flag("plain job %d: completed at %s, before its grant (token %d) began at %s", j.ID,
				pj.FinishedAt.Format(time.RFC3339Nano), pj.FinishedToken, gs[i].Start.Format(time.RFC3339Nano))
		case pj.FinishedAt.After(gs[i].End.Add(completeSlack)):
			r.PlainExpired++
			flag("plain job %d: completed at %s under token %d, whose lease expired at %s (stale completion under an expired grant)",
				j.ID, pj.FinishedAt.Format(time.RFC3339Nano), pj.FinishedToken, gs[i].End.Format(time.RFC3339Nano))
		}
		for _, g := range gs[i+1:] {
			if g.Token > pj.FinishedToken && !pj.FinishedAt.Before(g.Start) {
				r.PlainStale++
				flag("plain job %d: completed at %s under token %d, after token %d (owner %s) took partition %d at %s (stale completion accepted)",
					j.ID, pj.FinishedAt.Format(time.RFC3339Nano), pj.FinishedToken, g.Token, g.Owner, j.Partition, g.Start.Format(time.RFC3339Nano))
				break
			}
		}
	}
	for _, ev := range in.Events {
		pj, ok := plain[ev.Job]
		if ev.Type != EventCommit || !ok {
			continue
		}
		switch {
		case ev.Outcome == string(queue.OutcomeCompleted) && ev.Token != pj.FinishedToken:
			r.PlainMisreported++
			flag("plain job %d: %s reported it completed under token %d; its completion was recorded under token %d",
				ev.Job, ev.Worker, ev.Token, pj.FinishedToken)
		case ev.Outcome == string(queue.OutcomeFenced) && ev.Token == pj.FinishedToken:
			r.PlainMisreported++
			flag("plain job %d: %s reported its completion under token %d fenced, yet it was recorded under that token",
				ev.Job, ev.Worker, ev.Token)
		}
	}
}

// readPlain reads the plain jobs' completions and runs.
func readPlain(ctx context.Context, db *pgxpool.Pool, q queries, group string) ([]PlainJob, []PlainRun, error) {
	rows, err := db.Query(ctx, q.plainJobs, group)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: read plain jobs: %w", err)
	}
	var jobs []PlainJob
	for rows.Next() {
		var j PlainJob
		var at *time.Time
		if err := rows.Scan(&j.ID, &j.FinishedToken, &at); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("chaos: read plain jobs: %w", err)
		}
		if at != nil {
			j.FinishedAt = *at
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("chaos: read plain jobs: %w", err)
	}
	rows, err = db.Query(ctx, q.plainRuns)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: read plain runs: %w", err)
	}
	var runs []PlainRun
	for rows.Next() {
		var r PlainRun
		if err := rows.Scan(&r.N, &r.Job, &r.Partition, &r.Token, &r.Worker); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("chaos: read plain runs: %w", err)
		}
		runs = append(runs, r)
	}
	return jobs, runs, rows.Err()
}
