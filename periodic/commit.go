package periodic

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/queue"
)

// pruneBatch bounds the slot rows of each schedule one prune deletes
// (pruning runs once a minute: 1000 keeps up with a schedule of every
// 100ms, the shortest).
const pruneBatch = 1000

// commit records the slots of plan and enqueues their jobs in one
// transaction fenced by token: the slots whose record already exists (the
// primary key) enqueue nothing, and if the lease has moved on, nothing
// commits. On success plan's JobIDs are set. now is the leader's time;
// with prune, the transaction also deletes slot records older than the
// retention.
func (s *Scheduler) commit(ctx context.Context, token fence.Token, plan []planned, now time.Time, prune bool) error {
	slots := make([]Slot, len(plan))
	isFresh := make([]bool, len(plan)) // the slots this transaction inserted
	for i := range plan {
		plan[i].JobID = 0
	}
	err := s.tx(ctx, token, func(tx pgx.Tx) error {
		n := len(plan)
		names, ats, missed, skip := make([]string, n), make([]time.Time, n), make([]int32, n), make([]bool, n)
		type key struct {
			name string
			us   int64
		}
		at := make(map[key]int, n)
		for i, p := range plan {
			names[i], ats[i], missed[i], skip[i] = p.Schedule, p.At, int32(p.Missed), p.Skip
			at[key{p.Schedule, p.At.UnixMicro()}] = i
		}
		rows, err := tx.Query(ctx, s.q.Insert, s.cfg.Group, names, ats, missed, int64(token), skip)
		if err != nil {
			return err
		}
		var fresh []int // indexes into plan of the slots recorded now
		for rows.Next() {
			var name string
			var t time.Time
			if err := rows.Scan(&name, &t); err != nil {
				rows.Close()
				return err
			}
			i, ok := at[key{name, t.UnixMicro()}]
			if !ok {
				rows.Close()
				return fmt.Errorf("periodic: record of an unplanned slot %q %v", name, t)
			}
			fresh, isFresh[i] = append(fresh, i), true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var jobs []queue.Job
		var enq []int
		for _, i := range fresh {
			p := plan[i]
			if p.Skip {
				continue
			}
			j := p.job
			jobs, enq = append(jobs, j), append(enq, i)
		}
		if len(jobs) > 0 {
			res, err := s.jobs.EnqueueTx(ctx, tx, jobs...)
			if err != nil {
				return fmt.Errorf("periodic: enqueue: %w", err)
			}
			jn, jt, ids := make([]string, 0, len(res)), make([]time.Time, 0, len(res)), make([]int64, 0, len(res))
			for k, r := range res {
				if r.ID == 0 {
					continue // a duplicate of a pending job with its UniqueKey
				}
				p := &plan[enq[k]]
				p.JobID = r.ID
				jn, jt, ids = append(jn, p.Schedule), append(jt, p.At), append(ids, r.ID)
			}
			if len(ids) > 0 {
				if _, err := tx.Exec(ctx, s.q.SetJobs, s.cfg.Group, jn, jt, ids); err != nil {
					return err
				}
			}
		}
		// The next slot of each schedule after this transaction, and the
		// slots the ones recorded now count missed, for the CLI.
		last, add := make(map[int]time.Time), make(map[int]int64)
		for _, p := range plan {
			last[p.index] = p.At
		}
		for _, i := range fresh {
			add[plan[i].index] += int64(plan[i].Missed)
		}
		nn, nt, nm := make([]string, 0, len(last)), make([]time.Time, 0, len(last)), make([]int64, 0, len(last))
		for i, t := range last {
			nn, nt, nm = append(nn, s.scheds[i].Name), append(nt, s.scheds[i].next(t)), append(nm, add[i])
		}
		if _, err := tx.Exec(ctx, s.q.SetNext, s.cfg.Group, nn, nt, nm); err != nil {
			return err
		}
		if prune {
			if _, err := tx.Exec(ctx, s.q.Prune, s.cfg.Group, now.Add(-s.cfg.Retention), pruneBatch); err != nil {
				return err
			}
		}
		for i, p := range plan {
			slots[i] = p.Slot
		}
		if h := s.hooks.beforeCommit; h != nil {
			h(ctx, token, slots)
		}
		return nil
	})
	for i, p := range plan {
		slots[i] = p.Slot
	}
	if h := s.hooks.attempt; h != nil {
		h(token, slots, err)
	}
	s.report(token, slots, isFresh, err)
	return err
}

// tx runs fn in a transaction fenced by the leader lease and token (without
// the fence for the negative control of the tests).
func (s *Scheduler) tx(ctx context.Context, token fence.Token, fn func(pgx.Tx) error) error {
	if !s.hooks.noFence {
		return s.fence.Tx(ctx, s.name, token, fn)
	}
	return pgx.BeginFunc(ctx, s.db.Pool(), fn)
}
