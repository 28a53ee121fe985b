package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }

// The backfill crashes after reading 700 of 1200 users (chunks of 500: the
// first chunk committed, the second lost) once the workers have finished
// some of them, runs again as a restarted
// process would, and runs a third time as a second invocation of the
// program. Checked from the tables, not from the queue: every user is
// re-priced exactly once (an audit row each, the price its plan's, the
// row's token the one that wrote the audit row), the summary follow-up ran
// once with the right figures, the restart resubmitted the first chunk as
// duplicates, the progress printed never went back and ends at 100%, and
// the third run changes nothing and prints the same result.
func TestBackfillCrashAndRerun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.DB(t)
	pool := db.Pool()
	cfg := config{Run: "reprice-test", Users: 1200, CrashAfter: 700, Chunk: 500, Page: 300,
		Every: 200 * time.Millisecond, TTL: 3 * time.Second}
	var out bytes.Buffer
	if err := backfill(ctx, db, &out, cfg); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	first := out.String()
	t.Logf("output:\n%s", first)
	for _, want := range []string{
		"simulated crash after reading 700 users: 500 items added, 0 already in the batch; the 200 of the chunk being built are lost",
		"--- starting again",
		"submitted 1200 items: 700 added, 500 already in the batch\n",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`is not sealed; (\d+) items finished`).FindStringSubmatch(first); m == nil || m[1] == "0" {
		t.Errorf("the crash came before any item finished, or said nothing of it")
	}
	checkProgress(t, first, 1200)

	c, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	b, err := c.Batch(ctx, group, cfg.Run)
	pgtest.Must(t, err)
	if b.Total != 1200 || b.Completed != 1200 || b.State() != queue.BatchSucceeded || b.CompleteJob == 0 {
		t.Fatalf("batch: %+v; want 1200 items, all completed, the on-complete follow-up enqueued", b)
	}
	var followUps int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE batch_id = $1 AND followup IS NOT NULL`, b.ID).Scan(&followUps))
	if followUps != 1 {
		t.Fatalf("%d follow-up jobs; want 1 (on complete only)", followUps)
	}
	o, err := check(ctx, pool, b.ID)
	pgtest.Must(t, err)
	if !o.ok() || o.Users != 1200 {
		t.Fatalf("outcome %+v; want 1200 users re-priced once each and one summary", o)
	}
	// The summary's figures, computed here from the seed's prices.
	oldPrice, newPrice := map[int64]int64{0: 0, 1: 700, 2: 2500, 3: 8900}, map[int64]int64{0: 0, 1: 900, 2: 2900, 3: 9900}
	var wantOld, wantNew int64
	for id := int64(1); id <= 1200; id++ {
		wantOld, wantNew = wantOld+oldPrice[id%4], wantNew+newPrice[id%4]
	}
	if o.OldCents != wantOld || o.NewCents != wantNew {
		t.Fatalf("summary: %d -> %d cents; want %d -> %d", o.OldCents, o.NewCents, wantOld, wantNew)
	}
	want := fmt.Sprintf("summary (the on-complete follow-up): 1200 users re-priced, monthly total %s -> %s\n", money(wantOld), money(wantNew))
	if !strings.Contains(first, want) {
		t.Fatalf("the output lacks %q", want)
	}
	// Each user's row carries the token of the grant that re-priced it.
	var mismatched int
	pgtest.Must(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM users AS u JOIN price_changes AS c ON c.user_id = u.id AND c.batch_id = $1
		WHERE u.fence_token <> c.token OR c.token <= 0 OR c.item <> u.id::text`, b.ID).Scan(&mismatched))
	if mismatched != 0 {
		t.Fatalf("%d users' rows do not carry the token (or item key) of their re-pricing", mismatched)
	}

	// A second invocation of the program: the batch is sealed, nothing is
	// submitted or re-priced, and the result is the same.
	out.Reset()
	if err := run(ctx, db, &out, cfg); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	second := out.String()
	if !strings.Contains(second, "the batch is sealed: its 1200 items are all in, nothing to submit\n") ||
		strings.Contains(second, "simulated crash") {
		t.Fatalf("second invocation:\n%s", second)
	}
	checkProgress(t, second, 1200)
	if tail(first, 2) != tail(second, 2) {
		t.Fatalf("the second invocation ends\n%s\nthe first\n%s", tail(second, 2), tail(first, 2))
	}
	o2, err := check(ctx, pool, b.ID)
	pgtest.Must(t, err)
	if o2 != o {
		t.Fatalf("the second invocation changed the outcome: %+v, then %+v", o, o2)
	}
}

// The check catches what it is there for (negative controls, each in a
// transaction rolled back): a user re-priced twice, a summary written
// twice, a user not re-priced; and the re-pricing refuses a stale token.
func TestBackfillCheckCatchesViolations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.DB(t)
	pool := db.Pool()
	var out bytes.Buffer
	if err := run(ctx, db, &out, config{Run: "reprice-control", Users: 40, Chunk: 1000, Page: 1000,
		Every: 100 * time.Millisecond, TTL: 3 * time.Second}); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	var id, tok int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT batch_id, token FROM price_changes WHERE user_id = 1`).Scan(&id, &tok))
	o, err := check(ctx, pool, id)
	pgtest.Must(t, err)
	if !o.ok() {
		t.Fatalf("the run's outcome is wrong before any tampering: %+v", o)
	}
	for _, c := range []struct {
		name, sql string
		caught    func(outcome) bool
	}{
		{"a user re-priced twice", `INSERT INTO price_changes SELECT * FROM price_changes WHERE user_id = 1`,
			func(o outcome) bool { return o.Twice == 1 }},
		{"the summary written twice", `INSERT INTO backfill_summaries SELECT * FROM backfill_summaries`,
			func(o outcome) bool { return o.Summaries == 2 }},
		{"a user not re-priced", `DELETE FROM price_changes WHERE user_id = 2`,
			func(o outcome) bool { return o.Missed == 1 }},
		{"a user at an old price", `UPDATE users SET price_cents = price_cents - 1 WHERE id = 3`,
			func(o outcome) bool { return o.WrongPrice == 1 }},
	} {
		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		_, err = tx.Exec(ctx, c.sql)
		pgtest.Must(t, err)
		o, err := check(ctx, tx, id)
		pgtest.Must(t, err)
		if o.ok() || !c.caught(o) {
			t.Errorf("%s: outcome %+v passes the check, or not for that reason", c.name, o)
		}
		pgtest.Must(t, tx.Rollback(ctx))
	}

	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	err = reprice(ctx, tx, &queue.Work[Reprice]{Token: fence.Token(tok - 1), Batch: id, Item: "1", Args: Reprice{User: 1}})
	if !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("re-pricing with a stale token: %v; want ErrFenced", err)
	}
}

var progressLine = regexp.MustCompile(`^progress: (\d+)/(\d+) finished \((\d+)%\).*batch (\w+);`)

// checkProgress checks the progress lines of out: the items finished never
// go back, and the last line says every one of total is finished (100%)
// and the batch succeeded.
func checkProgress(t *testing.T, out string, total int64) {
	t.Helper()
	var last []string
	prev := int64(-1)
	for _, l := range strings.Split(out, "\n") {
		m := progressLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		done, _ := strconv.ParseInt(m[1], 10, 64)
		if done < prev {
			t.Errorf("progress went back: %q after %d finished", l, prev)
		}
		prev, last = done, m
	}
	if last == nil {
		t.Fatalf("no progress line in:\n%s", out)
	}
	if want := []string{strconv.FormatInt(total, 10), strconv.FormatInt(total, 10), "100", "succeeded"}; strings.Join(last[1:], " ") != strings.Join(want, " ") {
		t.Fatalf("the last progress line is %q; want %d/%d finished (100%%), batch succeeded", last[0], total, total)
	}
}

// tail returns the last n lines of out.
func tail(out string, n int) string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// The handlers alone, run inline in the test's transaction on a throwaway
// schema: reprice writes the user's new price under the run's token with
// its audit row, and summarize then adds up that one change.
func TestRepriceInline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, group, 4)
	tx := leaseholdtest.Tx(ctx, t, db) // the example's tables: in the test's schema, rolled back
	_, err := tx.Exec(ctx, schema)
	pgtest.Must(t, err)
	_, err = tx.Exec(ctx, seed, 8)
	pgtest.Must(t, err)

	ws := queue.NewWorkers()
	queue.HandleTx(ws, reprice)
	queue.HandleTx(ws, summarize)
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	res, err := w.WorkTx(ctx, t, tx, queue.Job{Group: group, Key: "2", Args: Reprice{User: 2}}) // user 2: pro, 2500 -> 2900
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.FinishedToken == nil {
		t.Fatalf("reprice: %+v, %v; want completed", res, err)
	}
	var price, tok, changes int64
	pgtest.Must(t, tx.QueryRow(ctx, `SELECT price_cents, fence_token, (SELECT count(*) FROM price_changes WHERE user_id = 2 AND token = u.fence_token)
		FROM users AS u WHERE id = 2`).Scan(&price, &tok, &changes))
	if price != 2900 || fence.Token(tok) != *res.Job.FinishedToken || changes != 1 {
		t.Fatalf("user 2: price %d, token %d, %d audit rows with it; want 2900 under the run's token %d, one audit row", price, tok, changes, *res.Job.FinishedToken)
	}
	res, err = w.WorkTx(ctx, t, tx, queue.Job{Group: group, Args: Summarize{Run: "inline"}})
	if err != nil || res.Outcome != queue.OutcomeCompleted {
		t.Fatalf("summarize: %+v, %v", res, err)
	}
	var users, oldCents, newCents int64
	pgtest.Must(t, tx.QueryRow(ctx, `SELECT users, old_cents, new_cents FROM backfill_summaries WHERE run = 'inline'`).Scan(&users, &oldCents, &newCents))
	if users != 1 || oldCents != 2500 || newCents != 2900 {
		t.Fatalf("summary: %d users, %d -> %d; want 1, 2500 -> 2900", users, oldCents, newCents)
	}
	leaseholdtest.RequireNotEnqueuedTx[Reprice](ctx, t, db, tx, nil)
}
