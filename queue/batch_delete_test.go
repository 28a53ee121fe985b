package queue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// DeleteBatch refuses a batch that is not finished (ErrBatchNotFinished,
// nothing deleted) and an unknown one (ErrUnknownBatch); a finished batch
// is deleted with its items, its progress is gone and its name can be
// taken again. The control: the refused batch's items are all there.
func TestBatchDeleteDeletesAFinishedBatchOnly(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice", "batch_done")
	createBatch(t, c, "done")
	createBatch(t, c, "running")
	_, err := c.SubmitItems(ctx, "emails", "done", items(5, nil))
	pgtest.Must(t, err)
	_, err = c.SubmitItems(ctx, "emails", "running", items(4, nil))
	pgtest.Must(t, err)
	_, err = c.SealBatch(ctx, "emails", "running")
	pgtest.Must(t, err)
	_, err = c.CancelBatch(ctx, "emails", "done") // every item cancelled: finished
	pgtest.Must(t, err)

	_, err = c.DeleteBatch(ctx, "emails", "running")
	if !errors.Is(err, queue.ErrBatchNotFinished) {
		t.Fatalf("deleting a running batch: %v; want ErrBatchNotFinished", err)
	}
	if _, err := c.DeleteBatch(ctx, "emails", "nope"); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Fatalf("deleting an unknown batch: %v; want ErrUnknownBatch", err)
	}
	if n := itemCount(t, pool); n != 9 {
		t.Fatalf("control: %d items after the refusals; want 9", n)
	}
	n, err := c.DeleteBatch(ctx, "emails", "done")
	pgtest.Must(t, err)
	if n != 5 || itemCount(t, pool) != 4 {
		t.Fatalf("deleted %d items, %d left; want 5 deleted and the running batch's 4 left", n, itemCount(t, pool))
	}
	if _, err := c.Batch(ctx, "emails", "done"); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Fatalf("reading a deleted batch: %v; want ErrUnknownBatch", err)
	}
	var rows int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM leasehold.batch_totals) + (SELECT count(*) FROM leasehold.batch_counts)
		- (SELECT count(*) FROM leasehold.batch_totals AS t JOIN leasehold.batches AS b ON b.id = t.batch_id WHERE b.name = 'running')`).Scan(&rows))
	if rows != 0 {
		t.Fatalf("%d counter rows of the deleted batch left", rows)
	}
	if b := createBatch(t, c, "done"); b.Total != 0 || b.State() != queue.BatchOpen {
		t.Fatalf("the name taken again: %+v; want a new, empty batch", b)
	}
}

// Retention deletes a finished batch once its items are gone and it
// finished longer ago than BatchRetention; it keeps a batch finished more
// recently (its items gone or not) and one not finished, however old.
func TestBatchRetentionDeletesOldFinishedBatches(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice", "batch_done")
	for _, name := range []string{"old", "young", "fresh", "open"} {
		createBatch(t, c, name)
		_, err := c.SubmitItems(ctx, "emails", name, items(3, nil))
		pgtest.Must(t, err)
		if name != "open" {
			_, err = c.CancelBatch(ctx, "emails", name)
			pgtest.Must(t, err)
		}
	}
	// Finished 2h, 70min ago, now; the open batch created 3h ago.
	_, err := pool.Exec(ctx, `
		UPDATE leasehold.batches SET finished_at = now() - interval '2 hours' WHERE name = 'old';
		UPDATE leasehold.batches SET finished_at = now() - interval '70 minutes' WHERE name = 'young';
		UPDATE leasehold.batches SET created_at = now() - interval '3 hours' WHERE name = 'open';
		UPDATE leasehold.jobs SET finished_at = now() - interval '3 hours' WHERE state <> 'pending'`)
	pgtest.Must(t, err)
	member(t, pool, 8, queue.ProcessorConfig{Workers: queue.NewWorkers(), PollInterval: 20 * time.Millisecond,
		Retention: time.Hour, RetentionInterval: 20 * time.Millisecond, BatchRetention: 90 * time.Minute}, false)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Batch(ctx, "emails", "old"); errors.Is(err, queue.ErrUnknownBatch) {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("retention never deleted the old finished batch")
		}
	}
	time.Sleep(200 * time.Millisecond) // more rounds
	var youngItems, freshItems, openItems int
	var youngGone bool
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM leasehold.jobs AS j JOIN leasehold.batches AS b ON b.id = j.batch_id WHERE b.name = 'young' AND j.batch_item IS NOT NULL),
		(SELECT count(*) FROM leasehold.jobs AS j JOIN leasehold.batches AS b ON b.id = j.batch_id WHERE b.name = 'fresh' AND j.batch_item IS NOT NULL),
		(SELECT count(*) FROM leasehold.jobs AS j JOIN leasehold.batches AS b ON b.id = j.batch_id WHERE b.name = 'open' AND j.batch_item IS NOT NULL),
		(SELECT items_gone_at IS NOT NULL FROM leasehold.batches WHERE name = 'young')`).Scan(&youngItems, &freshItems, &openItems, &youngGone))
	for _, name := range []string{"young", "fresh", "open"} {
		if _, err := c.Batch(ctx, "emails", name); err != nil {
			t.Errorf("batch %q: %v; want it kept", name, err)
		}
	}
	if youngItems != 0 || !youngGone || freshItems != 3 || openItems != 3 {
		t.Errorf("items left: young %d (gone marked %v), fresh %d, open %d; want 0 (marked), 3, 3", youngItems, youngGone, freshItems, openItems)
	}
}

// retainItemsBefore is queueRetainItems before migration 16: it probed
// every finished batch of the group, every round.
const retainItemsBefore = `
DELETE FROM leasehold.jobs
WHERE id = ANY(ARRAY(
        SELECT f.id
        FROM leasehold.batches AS b
        CROSS JOIN LATERAL (
            SELECT f.id FROM leasehold.jobs AS f
            WHERE f.batch_id = b.id AND f.partition = ANY($2::int[]) AND f.state <> 'pending' AND f.batch_item IS NOT NULL
            LIMIT $4) AS f
        WHERE b.group_name = $1 AND b.finished_at < clock_timestamp() - $3 * interval '1 microsecond'
        LIMIT $4))
  AND state <> 'pending'`

// A retention round's work is bounded whatever the number of batches ever
// run: with 1,000 old finished batches whose items are gone, the item
// retention statement examines rows for at most RetainBatches of them,
// and one marking and one deleting statement change at most RetainBatches
// each. The control: the statement before examined every batch.
func TestBatchRetentionRoundIsBounded(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	const batches = 1000
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO leasehold.batches (group_name, name, sealed_at, finished_at)
		SELECT 'emails', 'b-' || i, now() - interval '40 days', now() - interval '40 days' FROM generate_series(1, %d) AS i;
		ANALYZE leasehold.batches`, batches))
	pgtest.Must(t, err)
	st, err := store.For("")
	pgtest.Must(t, err)
	parts := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	examined := func(sql string, args ...any) int64 {
		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, store.MemberSettings) // as retention runs it
		pgtest.Must(t, err)
		var plan string
		pgtest.Must(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&plan))
		return rowsExamined(t, plan)
	}
	day := (24 * time.Hour).Microseconds()
	got := examined(st.Queue.RetainItems, "emails", parts, day, queue.RetainChunk, queue.RetainBatches)
	control := examined(retainItemsBefore, "emails", parts, day, queue.RetainChunk)
	t.Logf("rows examined by a round of item retention over %d finished batches: %d (control, before: %d)", batches, got, control)
	if got > 3*queue.RetainBatches {
		t.Errorf("item retention examined %d rows for %d batches: it grows with the batches ever run", got, batches)
	}
	if control < batches {
		t.Errorf("control: the statement before examined %d rows; want at least %d, or this test cannot tell", control, batches)
	}
	marked, err := pool.Exec(ctx, st.Batch.MarkGone, "emails", day, queue.RetainBatches)
	pgtest.Must(t, err)
	deleted, err := pool.Exec(ctx, st.Batch.Retain, "emails", (30 * 24 * time.Hour).Microseconds(), queue.RetainBatches)
	pgtest.Must(t, err)
	if marked.RowsAffected() != queue.RetainBatches || deleted.RowsAffected() != queue.RetainBatches {
		t.Errorf("one round marked %d and deleted %d batches; want %d each", marked.RowsAffected(), deleted.RowsAffected(), queue.RetainBatches)
	}
}

// A backlog of finished batches larger than a round's bound (as every
// finished batch is after migration 0016, unmarked) drains round after
// round, PollInterval apart, not one bound per RetentionInterval: a round
// that hit the bound counts as cut short.
func TestBatchRetentionBacklogDrainsRoundAfterRound(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, _ := setup(t)
	const batches = 2*queue.RetainBatches + 50
	_, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO leasehold.batches (group_name, name, sealed_at, finished_at)
		SELECT 'emails', 'b-' || i, now() - interval '40 days', now() - interval '40 days' FROM generate_series(1, %d) AS i`, batches))
	pgtest.Must(t, err)
	left := func() (n int) {
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.batches WHERE group_name = 'emails'`).Scan(&n))
		return n
	}
	// A round an hour apart: only the cut-short rule brings the next ones.
	member(t, pool, 8, queue.ProcessorConfig{Workers: queue.NewWorkers(), PollInterval: 20 * time.Millisecond,
		RetentionInterval: time.Hour}, false)
	for start := time.Now(); left() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("%d of %d old finished batches left after 15s; want all deleted in consecutive rounds", left(), batches)
		}
	}
}
