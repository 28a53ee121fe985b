package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// One flush of the member's completer records the outcomes of several
// grants in one statement; each partition stays fenced on its own. Here
// partition 1 is handed over (released and granted to another owner) after
// its outcomes were handed to the completer and before the flush, and
// partition 2's lease expires: the flush applies partition 0's outcomes,
// refuses partitions 1's and 2's with a *fence.FencedError each, and
// changes none of their jobs. Negative control: the same flush through the
// unfenced statement (store's Complete) applies the stale owners'
// outcomes, and the check over the recorded history catches it.
func TestFlushFencesEachPartition(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	db := pgtest.DB(t)
	pool := db.Pool()
	newClient := func(owner string, ttl time.Duration) *lease.Client {
		lc, err := lease.New(db, lease.Config{Owner: owner, TTL: ttl})
		pgtest.Must(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			lc.Close(ctx)
		})
		return lc
	}
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 3)`)
	pgtest.Must(t, err)

	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			_, err := pool.Exec(ctx, `DELETE FROM leasehold.jobs; DELETE FROM leasehold.leases`)
			pgtest.Must(t, err)
			old, next := newClient(fmt.Sprintf("old-%v", control), time.Minute), newClient(fmt.Sprintf("new-%v", control), time.Minute)
			// The old owner's grants of partitions 0, 1 and 2, each with
			// two running jobs.
			grants := make([]partition.Ownership, 3)
			jobs := make([][]int64, 3)
			for part := range grants {
				l, err := old.TryAcquire(ctx, partition.LeaseName("g", part))
				pgtest.Must(t, err)
				grants[part] = partition.Ownership{Group: "g", Partition: part, Token: l.Token(), Lease: l}
				for range 2 {
					var id int64
					pgtest.Must(t, pool.QueryRow(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
						VALUES ('g', $1, '', 'k', '{}', 3, clock_timestamp()) RETURNING id`, part).Scan(&id))
					jobs[part] = append(jobs[part], id)
				}
			}
			// Handoff of partition 1 in the middle of the flush: its
			// outcomes are in hand, its lease goes to the new owner.
			pgtest.Must(t, grants[1].Lease.Release(ctx))
			taken, err := next.TryAcquire(ctx, partition.LeaseName("g", 1))
			pgtest.Must(t, err)
			// Partition 2's lease expires (database clock).
			_, err = pool.Exec(ctx, `UPDATE leasehold.leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1`,
				grants[2].Lease.Name())
			pgtest.Must(t, err)

			p, err := NewProcessor(db, ProcessorConfig{Workers: NewWorkers()})
			pgtest.Must(t, err)
			gs := make([]grantOutcomes, 3)
			for part, o := range grants {
				gs[part].o = o
				for _, id := range jobs[part] {
					gs[part].outs = append(gs[part].outs, outcome{id: id, state: "completed", spent: 1})
				}
			}
			refused := make([]error, len(gs))
			if control {
				flushUnfenced(t, ctx, db, gs)
			} else {
				_, err = p.record(ctx, gs, refused)
				pgtest.Must(t, err)
				var fe *fence.FencedError
				if refused[0] != nil || !errors.As(refused[1], &fe) || !errors.As(refused[2], &fe) {
					t.Fatalf("refusals %v; want none for partition 0 and a *fence.FencedError for partitions 1 and 2", refused)
				}
			}
			live := map[int]fence.Token{0: grants[0].Token, 1: taken.Token()}
			violations := staleFinishes(t, ctx, db, jobs, live)
			switch {
			case !control && len(violations) > 0:
				t.Fatalf("fenced flush: %v", violations)
			case control && len(violations) == 0:
				t.Fatal("control: the unfenced flush applied the stale outcomes undetected: the check cannot fail")
			}
			if !control {
				var done int
				pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE id = ANY($1) AND state = 'completed'
					AND finished_token = $2`, jobs[0], int64(grants[0].Token)).Scan(&done))
				if done != 2 {
					t.Fatalf("partition 0: %d jobs completed under its token; want 2 (the live grant's outcomes applied)", done)
				}
			}
		})
	}
}

// flushUnfenced records gs's outcomes with the unfenced statement (the
// negative control).
func flushUnfenced(t *testing.T, ctx context.Context, db *leasehold.DB, gs []grantOutcomes) {
	t.Helper()
	var ids []int64
	var states []string
	var spent []int32
	var tokens []int64
	for _, g := range gs {
		for _, o := range g.outs {
			ids, states, spent, tokens = append(ids, o.id), append(states, o.state), append(spent, o.spent), append(tokens, int64(g.o.Token))
		}
	}
	n := len(ids)
	st, err := store.For("")
	pgtest.Must(t, err)
	_, err = db.Pool().Exec(ctx, st.Queue.Complete, ids, states, spent, make([]*int64, n), make([]*string, n), tokens, nil)
	pgtest.Must(t, err)
}

// staleFinishes checks the recorded history: every job of jobs (by
// partition) that finished did so under its partition's live token (live;
// a partition absent from it has no live grant). It returns the
// violations.
func staleFinishes(t *testing.T, ctx context.Context, db *leasehold.DB, jobs [][]int64, live map[int]fence.Token) []string {
	t.Helper()
	var out []string
	for part, ids := range jobs {
		rows, err := db.Pool().Query(ctx, `SELECT id, finished_token FROM leasehold.jobs WHERE id = ANY($1) AND state <> 'pending'`, ids)
		pgtest.Must(t, err)
		for rows.Next() {
			var id int64
			var token int64
			pgtest.Must(t, rows.Scan(&id, &token))
			if want, ok := live[part]; !ok || fence.Token(token) != want {
				out = append(out, fmt.Sprintf("job %d of partition %d finished under token %d (live: %v)", id, part, token, live[part]))
			}
		}
		pgtest.Must(t, rows.Err())
	}
	return out
}
