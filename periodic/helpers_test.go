package periodic_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

// slotRow is a row of periodic_slots.
type slotRow struct {
	Schedule string
	Slot     time.Time
	JobID    int64 // 0: none (skipped)
	Token    int64
	Missed   int
}

// jobRow is a tick job in the jobs table.
type jobRow struct {
	ID       int64
	Schedule string
	Slot     time.Time
}

func ensureGroup(t *testing.T, db *leasehold.DB, group string) {
	t.Helper()
	c, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	_, err = c.EnsureGroup(pgtest.Context(t), group, 4)
	pgtest.Must(t, err)
}

// readSlots returns the slot rows of group, by schedule then slot.
func readSlots(ctx context.Context, pool *pgxpool.Pool, group string) ([]slotRow, error) {
	rows, err := pool.Query(ctx, `SELECT schedule, slot, coalesce(job_id, 0), token, missed
		FROM leasehold.periodic_slots WHERE group_name = $1 ORDER BY schedule, slot`, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []slotRow
	for rows.Next() {
		var r slotRow
		if err := rows.Scan(&r.Schedule, &r.Slot, &r.JobID, &r.Token, &r.Missed); err != nil {
			return nil, err
		}
		r.Slot = r.Slot.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// readJobs returns the tick jobs of group, by id.
func readJobs(ctx context.Context, pool *pgxpool.Pool, group string) ([]jobRow, error) {
	rows, err := pool.Query(ctx, `SELECT id, args->>'schedule', (args->>'slot')::timestamptz
		FROM leasehold.jobs WHERE group_name = $1 AND kind = 'tick' ORDER BY id`, group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []jobRow
	for rows.Next() {
		var r jobRow
		if err := rows.Scan(&r.ID, &r.Schedule, &r.Slot); err != nil {
			return nil, err
		}
		r.Slot = r.Slot.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// checkRecords checks the recorded slots and jobs of the schedules:
//   - every job belongs to the slot record that names it, one job per slot
//     (a duplicate enqueue shows as two jobs of one slot), none without a
//     record; a skipped slot has no job, an enqueued one has one;
//   - the slots of a schedule are covered without a hole: the number of
//     slots strictly between two consecutive records is the later one's
//     missed count (a slot lost, or counted twice, breaks it);
//   - tokens never decrease along a schedule's slots;
//   - a schedule's slots are missed (missed > 0, or skipped) only by the
//     first record of a token, the new leader's catch-up: a leader never
//     drops a slot that came due while it led.
func checkRecords(scheds []periodic.Schedule, slots []slotRow, jobs []jobRow) error {
	byJob := make(map[int64]jobRow, len(jobs))
	perSlot := make(map[string]int)
	for _, j := range jobs {
		byJob[j.ID] = j
		k := fmt.Sprintf("%s@%s", j.Schedule, j.Slot.Format(time.RFC3339Nano))
		if perSlot[k]++; perSlot[k] > 1 {
			return fmt.Errorf("slot %s enqueued %d times", k, perSlot[k])
		}
	}
	named := make(map[int64]bool)
	for _, sc := range scheds {
		var prev *slotRow
		for i := range slots {
			r := &slots[i]
			if r.Schedule != sc.Name {
				continue
			}
			skip := sc.Missed == periodic.MissedSkip && r.JobID == 0
			if r.JobID != 0 {
				j, ok := byJob[r.JobID]
				if !ok || j.Schedule != r.Schedule || !j.Slot.Equal(r.Slot) {
					return fmt.Errorf("slot %s %v names job %d, which is %+v (found %v)", r.Schedule, r.Slot, r.JobID, j, ok)
				}
				named[r.JobID] = true
			} else if !skip {
				return fmt.Errorf("slot %s %v (policy %v) recorded without a job", r.Schedule, r.Slot, sc.Missed)
			}
			if prev != nil {
				between, err := periodic.SlotsBetween(sc, prev.Slot, r.Slot)
				if err != nil {
					return err
				}
				if between != r.Missed {
					return fmt.Errorf("schedule %s: %d slots between %v and %v, but the latter records %d missed",
						sc.Name, between, prev.Slot, r.Slot, r.Missed)
				}
				if r.Token < prev.Token {
					return fmt.Errorf("schedule %s: slot %v by token %d after slot %v by token %d",
						sc.Name, r.Slot, r.Token, prev.Slot, prev.Token)
				}
				if (r.Missed > 0 || skip) && r.Token == prev.Token {
					return fmt.Errorf("schedule %s: slot %v misses %d (skipped %v) under token %d, which led before it",
						sc.Name, r.Slot, r.Missed, skip, r.Token)
				}
			}
			prev = r
		}
	}
	for _, j := range jobs {
		if !named[j.ID] {
			return fmt.Errorf("job %d (%s %v) has no slot record", j.ID, j.Schedule, j.Slot)
		}
	}
	return nil
}

// slotTimes returns the slots of schedule name in rows.
func slotTimes(rows []slotRow, name string, jobsOnly bool) []time.Time {
	var out []time.Time
	for _, r := range rows {
		if r.Schedule == name && (!jobsOnly || r.JobID != 0) {
			out = append(out, r.Slot)
		}
	}
	return out
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func equalTimes(a, b []time.Time) bool {
	return slices.EqualFunc(a, b, func(x, y time.Time) bool { return x.Equal(y) })
}
