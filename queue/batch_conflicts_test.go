package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// conflictsBefore is the statement that compared a chunk's skipped items
// with the batch's before it probed per item: a plain join, which the
// planner, on a table never analysed, ran as a scan of every item of the
// batch once per skipped item. Kept as the test's control.
const conflictsBefore = `
SELECT t.n, e.kind, e.key, e.args
FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[]) WITH ORDINALITY AS t(item, kind, k, a, n)
JOIN leasehold.jobs AS e ON e.batch_id = $1 AND e.batch_item = t.item
WHERE (e.kind, e.key, e.args) IS DISTINCT FROM (t.kind, t.k, t.a)
ORDER BY t.n
LIMIT 1`

// rowsExamined adds up, over an EXPLAIN (ANALYZE, FORMAT JSON) plan's
// nodes, the rows each produced (over all its loops) and the rows its
// filters removed: the work the statement did, in rows, whatever the
// machine's speed.
func rowsExamined(t *testing.T, plan string) int64 {
	t.Helper()
	type node struct {
		Rows      float64 `json:"Actual Rows"`
		Loops     float64 `json:"Actual Loops"`
		Filtered  float64 `json:"Rows Removed by Filter"`
		JoinFiltd float64 `json:"Rows Removed by Join Filter"`
		Plans     []json.RawMessage
	}
	var walk func(raw json.RawMessage) float64
	walk = func(raw json.RawMessage) float64 {
		var n node
		pgtest.Must(t, json.Unmarshal(raw, &n))
		sum := n.Rows*n.Loops + n.Filtered + n.JoinFiltd
		for _, c := range n.Plans {
			sum += walk(c)
		}
		return sum
	}
	var doc []struct{ Plan json.RawMessage }
	pgtest.Must(t, json.Unmarshal([]byte(plan), &doc))
	return int64(walk(doc[0].Plan))
}

// A producer that resumes (SubmitItems again after a crash) resubmits
// chunks its batch has: each skipped item is compared with the stored one
// by one probe of the item key index, so a chunk costs the same whatever
// the batch's size. The statement used to join the chunk with every item
// of the batch: on a table never analysed, 1000 duplicates in a batch of
// 5000 items examined ten million rows (measured: about 2 s a chunk on a
// 2-core machine; a batch of a million items would take hours per chunk
// to resume). The control runs that statement and must examine rows in
// proportion to chunk x batch, or this test cannot tell. A changed item is
// still found, at its index.
func TestBatchResubmittedChunkCostDoesNotGrowWithBatch(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	for _, s := range []string{
		`ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`, // never analysed
		`INSERT INTO leasehold.group_kinds (group_name, kind) VALUES ('emails', 'reprice')`,
	} {
		_, err := pool.Exec(ctx, s)
		pgtest.Must(t, err)
	}
	const size, chunk = 4000, 500
	b, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "big"})
	pgtest.Must(t, err)
	all := make([]queue.Item, size)
	for i := range all {
		all[i] = queue.Item{ID: fmt.Sprintf("user-%d", i), Args: reprice{User: i}}
	}
	a, err := c.AddItems(ctx, "emails", "big", all...)
	pgtest.Must(t, err)
	if a.Added != size {
		t.Fatalf("added %+v; want %d items", a, size)
	}

	ids, kinds, keys, args := make([]string, chunk), make([]string, chunk), make([]string, chunk), make([]string, chunk)
	for i := range chunk {
		js, err := json.Marshal(reprice{User: i})
		pgtest.Must(t, err)
		ids[i], kinds[i], keys[i], args[i] = fmt.Sprintf("user-%d", i), "reprice", "", string(js)
	}
	st, err := store.For("")
	pgtest.Must(t, err)
	examined := func(sql string) int64 {
		var plan string
		var found int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM (`+sql+`) AS x`, b.ID, ids, kinds, keys, args).Scan(&found))
		if found != 0 {
			t.Fatalf("the comparison found %d conflict(s) among items identical to the batch's", found)
		}
		pgtest.Must(t, pool.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, b.ID, ids, kinds, keys, args).Scan(&plan))
		return rowsExamined(t, plan)
	}
	got, control := examined(st.Batch.Conflicts), examined(conflictsBefore)
	t.Logf("rows examined comparing %d resubmitted items with a batch of %d: %d (control, the previous statement: %d)",
		chunk, size, got, control)
	if got > 10*chunk {
		t.Errorf("comparing %d resubmitted items examined %d rows: it grows with the batch's %d items", chunk, got, size)
	}
	if control < chunk*size/2 {
		t.Errorf("control: the previous statement examined %d rows; want about %d (chunk x batch), or this test cannot tell",
			control, chunk*size)
	}

	// The probe still finds an item resubmitted with other args.
	again := append([]queue.Item(nil), all[:chunk]...)
	again[300].Args = reprice{User: 300, Fail: true}
	_, err = c.AddItems(ctx, "emails", "big", again...)
	var ie *queue.ItemError
	if !errors.As(err, &ie) || !errors.Is(err, queue.ErrItemConflict) || ie.Index != 300 || ie.Item != "user-300" {
		t.Fatalf("resubmitting item 300 with other args: %v; want an *ItemError for index 300 wrapping ErrItemConflict", err)
	}
}
