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
	"github.com/leasehold/leasehold/queue"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

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
