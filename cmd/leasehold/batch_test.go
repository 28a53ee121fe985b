package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

type repriceArgs struct {
	User int  `json:"user"`
	Fail bool `json:"fail,omitempty"`
}

func (repriceArgs) Kind() string { return "reprice" }

type doneArgs struct {
	Which string `json:"which"`
}

func (doneArgs) Kind() string { return "done" }

// batchWorker starts a worker of group "g" (8 partitions) handling
// reprice items, which record their effect in batch_effects (in the
// item's fenced transaction) and fail while fail is set if their args say
// so, and done follow-ups, which record their run in batch_followups. It
// returns once the worker has recorded its kinds.
func batchWorker(t *testing.T, pool *pgxpool.Pool, fail *atomic.Bool) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
CREATE TABLE batch_effects (item text NOT NULL, job bigint NOT NULL);
CREATE TABLE batch_followups (which text NOT NULL, job bigint NOT NULL)`)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[repriceArgs]) error {
		if w.Args.Fail && fail.Load() {
			return errors.New("repricing failed")
		}
		_, err := tx.Exec(ctx, `INSERT INTO batch_effects (item, job) VALUES ($1, $2)`, w.Item, w.ID)
		return err
	})
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[doneArgs]) error {
		_, err := tx.Exec(ctx, `INSERT INTO batch_followups (which, job) VALUES ($1, $2)`, w.Args.Which, w.ID)
		return err
	})
	p, err := queue.NewProcessor(pgtest.DBOn(t, pool), queue.ProcessorConfig{Workers: ws, PollInterval: 20 * time.Millisecond,
		MinRetry: time.Millisecond, MaxRetry: time.Millisecond})
	pgtest.Must(t, err)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 8, Run: p.Run,
		PollInterval: 100 * time.Millisecond, Lease: lease.Config{TTL: 2 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var n int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.group_kinds WHERE group_name = 'g'`).Scan(&n))
		if n == 2 {
			return
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the worker recorded %d kinds after 30s", n)
		}
	}
}

// handles records kinds as handled by group g's workers, without a worker:
// the batch's items stay pending.
func handles(t *testing.T, pool *pgxpool.Pool, group string, kinds ...string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO leasehold.group_kinds (group_name, kind) SELECT $1, unnest($2::text[])`,
		group, kinds)
	pgtest.Must(t, err)
}

// itemLines returns the JSON lines of items from to to-1, user-<i>.
func itemLines(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf(`{"item":"user-%d","kind":"reprice","args":{"user":%d}}`, i, i))
	}
	return out
}

// itemRows counts the job rows of batch name, and their distinct item keys.
func itemRows(t *testing.T, pool *pgxpool.Pool, name string) (rows, distinct int) {
	t.Helper()
	pgtest.Must(t, pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT j.batch_item) FROM leasehold.jobs j
		JOIN leasehold.batches b ON b.id = j.batch_id WHERE b.name = $1 AND j.batch_item IS NOT NULL`, name).Scan(&rows, &distinct))
	return rows, distinct
}

// A malformed line in the middle of the input stops the submission,
// naming its line (counted with the blank lines), with the chunks before
// it added; run again with the line fixed, the submission resumes: the
// items added count as duplicates, and no item has two job rows.
func TestBatchSubmitResumesAfterABadLine(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice")
	lines := itemLines(0, 30)
	// Line 4 is blank: item i is on line i+1 up to item 2, on line i+2 after.
	lines = slices.Insert(lines, 3, "")
	bad := slices.Clone(lines)
	bad[23] = `{"item":"user-22","kind":"reprice","args":{"user":22}` // line 24, item 22: no closing brace
	submit := []string{"batch", "submit", "g", "reprice-1", "--database-url", url, "--chunk", "10"}

	out, err := runIn(t, strings.Join(bad, "\n"), submit...)
	var se *admin.SubmitError
	if !errors.As(err, &se) || se.Line != 24 || se.Added.Added != 20 || !errors.Is(err, admin.ErrBadInput) {
		t.Fatalf("bad line 24: %v (%+v); want a *SubmitError at line 24 after 20 items added", err, se)
	}
	for _, want := range []string{"line 24: invalid JSON", "20 items added before it", "run the same command again to resume"} {
		if !strings.Contains(errorLine(err), want) {
			t.Errorf("error %q; want it to say %q", errorLine(err), want)
		}
	}
	if out != "" {
		t.Errorf("output %q after an error", out)
	}
	if rows, distinct := itemRows(t, pool, "reprice-1"); rows != 20 || distinct != 20 {
		t.Fatalf("after the bad line: %d item rows, %d items; want the 2 chunks before it, 20", rows, distinct)
	}

	var res admin.SubmitResult
	pgtest.Must(t, runJSON(t, &res, strings.Join(lines, "\n")+"\n", append(submit, "--seal")...))
	if res.Items != 30 || res.Added != 10 || res.Duplicates != 20 || !res.Sealed || res.Total != 30 ||
		res.State != "running" || res.Group != "g" || res.Name != "reprice-1" || res.ID == 0 {
		t.Fatalf("resumed: %+v; want 30 items, 10 added, 20 duplicates, sealed", res)
	}
	if rows, distinct := itemRows(t, pool, "reprice-1"); rows != 30 || distinct != 30 {
		t.Fatalf("after resuming: %d item rows, %d items; want 30 of 30", rows, distinct)
	}
	// Run a third time, the batch being sealed: refused before reading,
	// without the advice to run it again.
	_, err = runIn(t, strings.Join(lines, "\n"), submit...)
	if !errors.Is(err, queue.ErrBatchSealed) || !strings.Contains(err.Error(), "with 30 items: it takes no more") ||
		strings.Contains(err.Error(), "run the same command again") {
		t.Errorf("a sealed batch: %v; want ErrBatchSealed saying it takes no more items", err)
	}
}

// A batch sealed while a submission runs refuses its next chunk: the error
// names the chunk's line and does not advise running the command again.
func TestBatchSealedDuringASubmission(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice")
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, "", "batch", "submit", "g", "s", "--database-url", url))
	in := &slowReader{lines: itemLines(0, 5), before: map[int]func(){3: func() {
		pgtest.Must(t, runJSON(t, &admin.BatchView{}, "", "batch", "seal", "g", "s", "--database-url", url))
	}}}
	cmd := newRootCmd()
	cmd.SetArgs([]string{"batch", "submit", "g", "s", "--database-url", url, "--chunk", "1"})
	cmd.SetIn(in)
	cmd.SetOut(io.Discard)
	err := cmd.ExecuteContext(context.Background())
	var se *admin.SubmitError
	if !errors.As(err, &se) || !errors.Is(err, queue.ErrBatchSealed) || se.First != 4 || se.Added.Added != 3 ||
		!strings.HasPrefix(err.Error(), "line 4: ") || strings.Contains(err.Error(), "run the same command again") {
		t.Fatalf("sealed after 3 lines: %v; want a *SubmitError at line 4 after 3 items added", err)
	}
	if rows, _ := itemRows(t, pool, "s"); rows != 3 {
		t.Errorf("%d items added; want 3", rows)
	}
}

// An item the queue refuses is reported by its input line: one the batch
// has with other args, one repeated in its chunk with other args, one of a
// kind no worker handles, one with an invalid item key.
func TestBatchSubmitNamesTheRefusedItemsLine(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice")
	submit := []string{"batch", "submit", "g", "b", "--database-url", url, "--chunk", "4"}
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, strings.Join(itemLines(0, 3), "\n"), submit...))
	for _, tc := range []struct {
		in       []string
		line     int
		want     string
		sentinel error
	}{
		// Item user-1 is on line 3 (line 2 is blank), in the first chunk.
		{append([]string{itemLines(0, 1)[0], "", `{"item":"user-1","kind":"reprice","args":{"user":7}}`}, itemLines(3, 6)...), 3,
			`item "user-1": batch "b" has this item key with args {"user": 1}, not {"user":7}`, queue.ErrItemConflict},
		// In the second chunk (lines 5 to 8): user-9 on line 6, again on line 8.
		{append(itemLines(3, 10), `{"item":"user-9","kind":"reprice","key":"k"}`), 8,
			`item "user-9": item key repeated (line 7) with another kind, key or args`, queue.ErrItemConflict},
		{append(itemLines(10, 15), `{"item":"user-15","kind":"nohandler"}`), 6,
			`no worker has a handler for kind(s) nohandler`, queue.ErrNoHandler},
		{append(itemLines(20, 22), `{"item":"`+strings.Repeat("x", 256)+`","kind":"reprice"}`), 3,
			`the item key must be 1 to 255 bytes`, queue.ErrInvalidItem},
		{append(itemLines(30, 32), `{"item":"user-32","kind":"reprice","kindd":"x"}`), 3,
			`unknown field "kindd"`, admin.ErrBadInput},
	} {
		before, _ := itemRows(t, pool, "b")
		_, err := runIn(t, strings.Join(tc.in, "\n"), submit...)
		var se *admin.SubmitError
		if !errors.As(err, &se) || se.Line != tc.line || !errors.Is(err, tc.sentinel) ||
			!strings.Contains(err.Error(), fmt.Sprintf("line %d: ", tc.line)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("input %q:\n%v\nwant a *SubmitError at line %d about %q", tail(strings.Join(tc.in, "|")), err, tc.line, tc.want)
			continue
		}
		after, _ := itemRows(t, pool, "b")
		if after-before != se.Added.Added {
			t.Errorf("line %d: %d item rows added, the error says %d", tc.line, after-before, se.Added.Added)
		}
	}
}

// status --json has exactly its documented fields, exact once a worker
// has finished the batch (one item discarded): the on-complete follow-up
// ran once, not the on-success one; retry puts the discarded item back,
// and once it completes the on-success follow-up runs, once.
func TestBatchStatusAfterAWorkerFinishesIt(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	var fail atomic.Bool
	fail.Store(true)
	batchWorker(t, pool, &fail)
	lines := itemLines(0, 50)
	lines[17] = `{"item":"user-17","kind":"reprice","args":{"user":17,"fail":true},"max_attempts":1}`
	var res admin.SubmitResult
	pgtest.Must(t, runJSON(t, &res, strings.Join(lines, "\n"), "batch", "submit", "g", "nightly", "--database-url", url,
		"--description", "nightly repricing", "--on-complete", "done", "--on-complete-args", `{"which":"complete"}`,
		"--on-success", "done", "--on-success-args", `{"which":"success"}`, "--seal"))
	if res.Added != 50 || !res.Sealed {
		t.Fatalf("submitted %+v", res)
	}
	status := func(cond func(map[string]any) bool) map[string]any {
		t.Helper()
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			var v map[string]any
			pgtest.Must(t, runJSON(t, &v, "", "batch", "status", "nightly", "--database-url", url))
			if cond(v) {
				return v
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("batch status after 30s: %v", v)
			}
		}
	}
	v := status(func(v map[string]any) bool { return v["finished_at"] != nil && v["complete_job"] != nil })
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"cancelled", "cancelled_at", "complete_job", "completed", "created_at", "description", "eta_seconds",
		"failed", "finished_at", "group", "id", "name", "pending", "rate", "read_at", "sealed", "sealed_at", "state",
		"succeeded_at", "success_job", "total"}
	if !slices.Equal(keys, want) {
		t.Errorf("status --json fields %v; want %v", keys, want)
	}
	var completeJob int64
	pgtest.Must(t, pool.QueryRow(context.Background(),
		`SELECT id FROM leasehold.jobs WHERE followup = 'complete' AND batch_id = $1`, res.ID).Scan(&completeJob))
	for k, w := range map[string]any{"id": float64(res.ID), "group": "g", "name": "nightly", "description": "nightly repricing",
		"state": "finished", "sealed": true, "total": 50.0, "pending": 0.0, "completed": 49.0, "failed": 1.0, "cancelled": 0.0,
		"eta_seconds": 0.0, "complete_job": float64(completeJob), "success_job": nil, "succeeded_at": nil, "cancelled_at": nil} {
		if v[k] != w {
			t.Errorf("status --json %s = %v; want %v", k, v[k], w)
		}
	}
	if r, ok := v["rate"].(float64); !ok || r <= 0 {
		t.Errorf("rate %v; want > 0", v["rate"])
	}
	out, err := runIn(t, "", "batch", "status", "g", "nightly", "--database-url", url)
	pgtest.Must(t, err)
	// The bar shows the items finished, discarded ones too.
	if bar := "[" + strings.Repeat("#", 40) + "] 100%  50 of 50 items finished"; !strings.Contains(out, bar) ||
		!strings.Contains(out, "batch nightly of group g") || !strings.Contains(out, fmt.Sprintf("on complete: job %d; on success: -", completeJob)) {
		t.Errorf("status output:\n%s\nwant the bar %q and the follow-ups", out, bar)
	}

	fail.Store(false)
	var c admin.BatchChange
	pgtest.Must(t, runJSON(t, &c, "", "batch", "retry", "nightly", "--database-url", url))
	if c.Retried == nil || *c.Retried != 1 || c.Cancelled != nil || c.Group != "g" {
		t.Fatalf("retry: %+v; want 1 retried", c)
	}
	v = status(func(v map[string]any) bool { return v["success_job"] != nil })
	if v["state"] != "succeeded" || v["completed"] != 50.0 || v["failed"] != 0.0 || v["succeeded_at"] == nil {
		t.Errorf("after the retry: %v", v)
	}
	pgtest.WaitNoPendingJobs(t, pool, 30*time.Second)
	var effects, items int
	pgtest.Must(t, pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT item) FROM batch_effects`).Scan(&effects, &items))
	if effects != 50 || items != 50 {
		t.Errorf("%d effects of %d items; want each of the 50 once", effects, items)
	}
	runs := map[string]int{}
	rows, err := pool.Query(context.Background(), `SELECT which FROM batch_followups`)
	pgtest.Must(t, err)
	var which string
	_, err = pgx.ForEachRow(rows, []any{&which}, func() error { runs[which]++; return nil })
	pgtest.Must(t, err)
	if runs["complete"] != 1 || runs["success"] != 1 || len(runs) != 2 {
		t.Errorf("follow-ups ran %v; want complete and success once each", runs)
	}
}

// list lists the batches newest first, with the page's limit; seal seals
// one named without its group; cancel cancels a batch's pending items and
// reports how many, and retry refuses a cancelled batch.
func TestBatchListSealCancelRetry(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice")
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, strings.Join(itemLines(0, 5), "\n"), "batch", "submit", "g", "first", "--database-url", url))
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, strings.Join(itemLines(0, 3), "\n"), "batch", "submit", "g", "second", "--database-url", url))
	var bs []admin.BatchView
	pgtest.Must(t, runJSON(t, &bs, "", "batch", "list", "--database-url", url))
	if len(bs) != 2 || bs[0].Name != "second" || bs[1].Name != "first" || bs[1].Total != 5 || bs[1].Pending != 5 || bs[1].State != "open" {
		t.Fatalf("list: %+v; want second then first", bs)
	}
	out, err := runIn(t, "", "batch", "list", "--limit", "1", "--database-url", url)
	pgtest.Must(t, err)
	if !strings.Contains(out, "second") || strings.Contains(out, "first") ||
		!strings.Contains(out, fmt.Sprintf("--before %d lists the next ones", bs[0].ID)) {
		t.Errorf("list --limit 1:\n%s", out)
	}
	pgtest.Must(t, runJSON(t, &bs, "", "batch", "list", "--group", "other", "--database-url", url))
	if len(bs) != 0 {
		t.Errorf("list --group other: %+v; want none", bs)
	}

	var v admin.BatchView
	pgtest.Must(t, runJSON(t, &v, "", "batch", "seal", "second", "--database-url", url))
	if !v.Sealed || v.State != "running" || v.Total != 3 {
		t.Errorf("seal: %+v", v)
	}
	_, err = runIn(t, strings.Join(itemLines(3, 4), "\n"), "batch", "submit", "g", "second", "--database-url", url)
	if !errors.Is(err, queue.ErrBatchSealed) {
		t.Errorf("submit to a sealed batch: %v", err)
	}

	out, err = runIn(t, "", "batch", "cancel", "g", "first", "--database-url", url)
	pgtest.Must(t, err)
	if out != "batch first of group g cancelled: 5 pending items cancelled\n" {
		t.Errorf("cancel: %q", out)
	}
	var c admin.BatchChange
	pgtest.Must(t, runJSON(t, &c, "", "batch", "cancel", "first", "--database-url", url))
	if c.Cancelled == nil || *c.Cancelled != 0 {
		t.Errorf("cancel again: %+v; want 0 cancelled", c)
	}
	pgtest.Must(t, runJSON(t, &v, "", "batch", "status", "first", "--database-url", url))
	if v.State != "cancelled" || v.Cancelled != 5 || v.Pending != 0 || v.CancelledAt == nil || v.FinishedAt == nil {
		t.Errorf("status of the cancelled batch: %+v", v)
	}
	if _, err := runIn(t, "", "batch", "retry", "first", "--database-url", url); !errors.Is(err, queue.ErrBatchCancelled) {
		t.Errorf("retry of a cancelled batch: %v; want ErrBatchCancelled", err)
	}
	var states []string
	rows, err := pool.Query(context.Background(), `SELECT DISTINCT state::text FROM leasehold.jobs j
		JOIN leasehold.batches b ON b.id = j.batch_id WHERE b.name = 'first'`)
	pgtest.Must(t, err)
	states, err = pgx.CollectRows(rows, pgx.RowTo[string])
	pgtest.Must(t, err)
	if !slices.Equal(states, []string{"cancelled"}) {
		t.Errorf("the cancelled batch's items are %v; want cancelled", states)
	}
}

// A batch named without its group is found in the one group having it;
// in two groups, the command asks for the group; in none, it says so.
func TestBatchNameInTwoGroups(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO leasehold.groups (name, partitions) VALUES ('h', 4)`)
	pgtest.Must(t, err)
	for _, g := range []string{"g", "h"} {
		pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, "", "batch", "submit", g, "daily", "--database-url", url))
	}
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, "", "batch", "submit", "h", "weekly", "--database-url", url))
	for _, cmd := range []string{"status", "seal", "cancel", "retry"} {
		_, err := runIn(t, "", "batch", cmd, "daily", "--database-url", url)
		var ae *admin.AmbiguousBatchError
		if !errors.As(err, &ae) || !slices.Equal(ae.Groups, []string{"g", "h"}) || !errors.Is(err, admin.ErrBadInput) ||
			!strings.Contains(err.Error(), `"daily" is in groups g, h: give the group`) {
			t.Errorf("batch %s daily: %v; want an error asking for the group", cmd, err)
		}
	}
	var v admin.BatchView
	pgtest.Must(t, runJSON(t, &v, "", "batch", "status", "h", "daily", "--database-url", url))
	if v.Group != "h" || v.Name != "daily" {
		t.Errorf("status h daily: %+v", v)
	}
	pgtest.Must(t, runJSON(t, &v, "", "batch", "status", "weekly", "--database-url", url))
	if v.Group != "h" || v.Name != "weekly" || v.State != "open" {
		t.Errorf("status weekly: %+v", v)
	}
	if _, err := runIn(t, "", "batch", "status", "monthly", "--database-url", url); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Errorf("status monthly: %v; want ErrUnknownBatch", err)
	}
	if _, err := runIn(t, "", "batch", "status", "g", "weekly", "--database-url", url); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Errorf("status g weekly: %v; want ErrUnknownBatch", err)
	}
}

// The progress bar: the finished share rounded down, full only at 100%,
// empty for a total of 0, any width.
func TestProgressBar(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		width       int
		bar, pct    string
	}{
		{0, 10, 10, "[..........]", "0%"},
		{5, 10, 10, "[#####.....]", "50%"},
		{10, 10, 10, "[##########]", "100%"},
		{999, 1000, 10, "[#########.]", "99%"},
		{1, 3, 4, "[#...]", "33%"},
		{0, 0, 5, "[.....]", "-"},
		{7, 7, 1, "[#]", "100%"},
		{3, 7, 0, "", "42%"},
		{12, 10, 3, "[###]", "100%"}, // more than the total: full, not beyond
		{-1, 10, 3, "[...]", "0%"},
	} {
		if got := progressBar(tc.done, tc.total, tc.width); got != tc.bar {
			t.Errorf("progressBar(%d, %d, %d) = %q; want %q", tc.done, tc.total, tc.width, got, tc.bar)
		}
		if got := percent(tc.done, tc.total); got != tc.pct {
			t.Errorf("percent(%d, %d) = %q; want %q", tc.done, tc.total, got, tc.pct)
		}
	}
}

// status --watch shows an open batch read after read until it is over
// (here: sealed empty), also as JSON lines, and ends quietly when its
// context does; --once (the control) prints once and returns at once.
func TestBatchStatusWatch(t *testing.T) {
	t.Parallel()
	url, _ := adminDB(t)
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, "", "batch", "submit", "g", "w", "--database-url", url))
	out, err := runIn(t, "", "batch", "status", "w", "--once", "--database-url", url)
	pgtest.Must(t, err)
	if strings.Count(out, "batch w of group g") != 1 || !strings.Contains(out, "sealed      no") {
		t.Fatalf("--once:\n%s", out)
	}
	start := func(ctx context.Context, args ...string) (*logtest.Buffer, chan error) {
		out, done := &logtest.Buffer{}, make(chan error, 1)
		cmd := newRootCmd()
		cmd.SetArgs(append([]string{"batch", "status", "g", "w", "--watch", "--database-url", url}, args...))
		cmd.SetOut(out)
		cmd.SetErr(io.Discard)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		return out, done
	}
	waitFor := func(out *logtest.Buffer, s string) {
		t.Helper()
		for start := time.Now(); !strings.Contains(out.String(), s); time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("no %q in the output after 30s:\n%s", s, out.String())
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, textDone := start(ctx)
	jsonl, jsonDone := start(ctx, "--json")
	icx, interrupt := context.WithCancel(ctx)
	interrupted, intDone := start(icx)
	waitFor(text, "batch w of group g (id")
	waitFor(jsonl, `"state":"open"`)
	waitFor(interrupted, "batch w of group g (id")
	interrupt()
	select {
	case err := <-intDone:
		if err != nil {
			t.Errorf("interrupted watch: %v; want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
	for name, done := range map[string]chan error{"text": textDone, "json": jsonDone} {
		select {
		case err := <-done:
			t.Fatalf("%s watch of an open batch returned (%v)", name, err)
		default:
		}
	}
	pgtest.Must(t, runJSON(t, &admin.BatchView{}, "", "batch", "seal", "g", "w", "--database-url", url))
	for _, done := range []chan error{textDone, jsonDone} {
		select {
		case err := <-done:
			pgtest.Must(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("the watch did not end 30s after the batch was sealed")
		}
	}
	frames := strings.Split(strings.TrimSpace(text.String()), "\n\n")
	if len(frames) < 2 || !strings.Contains(frames[0], "open") || !strings.Contains(frames[len(frames)-1], "succeeded") ||
		strings.Contains(text.String(), "\033") {
		t.Errorf("--watch output (not a terminal: frames, no escapes):\n%s", text.String())
	}
	lines := strings.Split(strings.TrimSpace(jsonl.String()), "\n")
	var last admin.BatchView
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || len(lines) < 2 || !last.Sealed || last.State != "succeeded" {
		t.Errorf("--watch --json: %d lines, the last %+v (%v)", len(lines), last, err)
	}
}

// The follow-ups of submit: a kind without a handler, args that are not a
// JSON object and another spec for an existing batch are refused, and
// nothing is added.
func TestBatchSubmitFollowUps(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice", "done")
	submit := []string{"batch", "submit", "g", "f", "--database-url", url}
	in := strings.Join(itemLines(0, 2), "\n")
	for _, tc := range []struct {
		args     []string
		sentinel error
		want     string
	}{
		{[]string{"--on-complete", "nohandler"}, queue.ErrNoHandler, "no worker has a handler for kind(s) nohandler"},
		{[]string{"--on-success", "done", "--on-success-args", "[1]"}, admin.ErrBadInput, "--on-success-args [1]: not a JSON object"},
		{[]string{"--on-complete", "done", "--on-complete-args", "{"}, admin.ErrBadInput, "--on-complete-args {: not a JSON object"},
		{[]string{"--chunk", "-1"}, admin.ErrBadInput, "--chunk -1 is not in 1..10000"},
	} {
		if _, err := runIn(t, in, append(submit, tc.args...)...); !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error about %q", tc.args, err, tc.want)
		}
	}
	if rows, _ := itemRows(t, pool, "f"); rows != 0 {
		t.Fatalf("%d items added by refused commands", rows)
	}
	// The control: a valid spec creates the batch; the same spec again is
	// accepted, another refused.
	args := append(submit, "--on-complete", "done", "--on-complete-args", `{"which": "complete"}`, "--description", "d")
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, in, args...))
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, in, append(submit, "--on-complete", "done", "--on-complete-args", `{"which":"complete"}`,
		"--description", "d")...))
	if _, err := runIn(t, in, append(submit, "--description", "other")...); !errors.Is(err, queue.ErrBatchExists) {
		t.Errorf("another description: %v; want ErrBatchExists", err)
	}
	if rows, distinct := itemRows(t, pool, "f"); rows != 2 || distinct != 2 {
		t.Errorf("%d item rows, %d items; want 2 of 2", rows, distinct)
	}
}

// On a terminal, the watch redraws its frame in place: before each frame
// but the first, the cursor goes up the previous frame's lines, which are
// cleared.
func TestBatchWatchRedrawsOnATerminal(t *testing.T) {
	t.Parallel()
	sealed := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reads := []queue.BatchInfo{
		{Name: "b", Group: "g", CreatedAt: sealed, SealedAt: &sealed, Total: 10, Pending: 4, Completed: 6, ReadAt: sealed.Add(time.Second)},
		{Name: "b", Group: "g", CreatedAt: sealed, SealedAt: &sealed, Total: 10, Pending: 0, Completed: 10, FinishedAt: &sealed,
			ReadAt: sealed.Add(2 * time.Second)},
	}
	var out bytes.Buffer
	n := 0
	err := watchBatch(context.Background(), &out, func(context.Context) (queue.BatchInfo, error) {
		n++
		return reads[n-1], nil
	}, false, true)
	pgtest.Must(t, err)
	first := batchFrame(admin.ViewOf(reads[0], admin.AverageRate(reads[0])))
	lines := strings.Count(first, "\n")
	want := first + fmt.Sprintf("\r\033[%dA\033[J", lines)
	if n != 2 || !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), "["+strings.Repeat("#", barWidth)+"] 100%") {
		t.Errorf("%d reads; output %q; want it to start %q", n, out.String(), want)
	}
	// The control: not on a terminal, no escapes.
	out.Reset()
	n = 0
	pgtest.Must(t, watchBatch(context.Background(), &out, func(context.Context) (queue.BatchInfo, error) {
		n++
		return reads[n-1], nil
	}, false, false))
	if strings.Contains(out.String(), "\033") || n != 2 {
		t.Errorf("not a terminal: %q", out.String())
	}
}

// slowReader yields its lines one at a time, pausing before each, and
// calling before[i] before line i+1 (after line i is read: with --chunk 1,
// added).
type slowReader struct {
	lines  []string
	pause  time.Duration
	before map[int]func()
	read   int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.lines) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.pause)
	if f := r.before[r.read]; f != nil {
		f()
	}
	n := copy(p, r.lines[0]+"\n")
	r.lines, r.read = r.lines[1:], r.read+1
	return n, nil
}

// submit's --timeout bounds each step, not the command: a producer slower
// in all than the timeout is served; a chunk held up longer than it (here
// behind a lock on the batch) is cut short, naming the timeout and the
// chunk's lines.
func TestBatchSubmitTimeoutBoundsEachStep(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice")
	submit := []string{"batch", "submit", "g", "slow", "--database-url", url, "--chunk", "1", "--timeout", "2s"}
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetArgs(append(submit, "--json"))
	cmd.SetIn(&slowReader{lines: itemLines(0, 4), pause: time.Second})
	cmd.SetOut(&out)
	pgtest.Must(t, cmd.ExecuteContext(context.Background()))
	if rows, _ := itemRows(t, pool, "slow"); rows != 4 {
		t.Fatalf("a producer slower than --timeout: %d items added; want 4 (%s)", rows, out.String())
	}
	// The control: a chunk waiting behind a lock on the batch row.
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT 1 FROM leasehold.batches WHERE name = 'slow' FOR UPDATE`)
	pgtest.Must(t, err)
	_, err = runIn(t, strings.Join(itemLines(4, 6), "\n"), submit...)
	var se *admin.SubmitError
	if !errors.As(err, &se) || se.First != 1 || se.Last != 1 || !strings.Contains(err.Error(), "longer than 2s (--timeout)") {
		t.Errorf("a chunk behind a lock: %v; want a *SubmitError for line 1 naming --timeout", err)
	}
}
