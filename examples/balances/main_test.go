package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }

func TestBalances(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.DB(t)
	pool := db.Pool()
	var out bytes.Buffer
	if err := run(ctx, db, &out, 200); err != nil {
		t.Fatal(err)
	}
	var want int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT sum(amount) FROM entries`).Scan(&want))
	exp := ""
	for _, pass := range []string{"1", "2"} {
		exp += "pass " + pass + ": 200 accounts recomputed; total balance " + itoa(want) + " (entries sum to " + itoa(want) + "); 0 wrong\n"
	}
	if out.String() != exp {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), exp)
	}
	leaseholdtest.RequireNotEnqueued[Recompute](ctx, t, db, nil) // every job finished

	// The write is conditional on the token: a stale token is refused, and
	// the job's transaction rolls back with it.
	var tok int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT fence_token FROM accounts WHERE id = 1`).Scan(&tok))
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	err = recompute(ctx, tx, &queue.Work[Recompute]{Token: fence.Token(tok - 1), Args: Recompute{1}})
	if !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("a write with a stale token: %v; want ErrFenced", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The handler alone, run inline in the test's transaction on a throwaway
// schema: the balance is written under the run's token, in the job's
// transaction, and the rollback leaves nothing behind.
func TestRecomputeInline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "balances", 16)
	tx := leaseholdtest.Tx(ctx, t, db) // the example's tables: in the test's schema, rolled back
	_, err := tx.Exec(ctx, schema)
	pgtest.Must(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO accounts (id) VALUES (1), (2); INSERT INTO entries VALUES (1, 30), (1, -5), (2, 7)`)
	pgtest.Must(t, err)

	ws := queue.NewWorkers()
	queue.HandleTx(ws, recompute)
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	res, err := w.WorkTx(ctx, t, tx, queue.Job{Group: "balances", Key: "1", Args: Recompute{1}})
	if err != nil || res.Outcome != queue.OutcomeCompleted || res.Job.FinishedToken == nil {
		t.Fatalf("run: %+v, %v; want completed", res, err)
	}
	var b1, b2, tok int64
	pgtest.Must(t, tx.QueryRow(ctx, `SELECT (SELECT balance FROM accounts WHERE id = 1), (SELECT balance FROM accounts WHERE id = 2),
		(SELECT fence_token FROM accounts WHERE id = 1)`).Scan(&b1, &b2, &tok))
	if b1 != 25 || b2 != 0 || fence.Token(tok) != *res.Job.FinishedToken {
		t.Fatalf("balances %d, %d, account 1 written under token %d; want 25, 0 (untouched), and the run's token %d", b1, b2, tok, *res.Job.FinishedToken)
	}
	leaseholdtest.RequireNotEnqueuedTx[Recompute](ctx, t, db, tx, nil)
}
