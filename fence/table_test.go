package fence_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestTableUpdateIsAConditionalWriteOnTheTarget(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctx, `CREATE SCHEMA app; CREATE TABLE app.accounts (id int PRIMARY KEY, balance int NOT NULL,
		fence_token bigint NOT NULL DEFAULT 0); INSERT INTO app.accounts VALUES (1, 0)`)
	pgtest.Must(t, err)
	tbl := fence.Table{Name: "app.accounts", KeyColumn: "id", TokenColumn: "fence_token"}
	pgtest.Must(t, tbl.Update(ctx, pool, 1, 5, "balance = balance + $3", 10))
	pgtest.Must(t, tbl.Update(ctx, pool, 1, 5, "balance = balance + $3", 1)) // same holder again
	err = tbl.Update(ctx, pool, 1, 3, "balance = balance + $3", 100)
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Current != 5 || fe.Held != 3 {
		t.Fatalf("stale update = %v; want *FencedError held 3 current 5", err)
	}
	var balance int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT balance FROM app.accounts WHERE id = 1`).Scan(&balance))
	if balance != 11 {
		t.Fatalf("balance = %d; want 11 (the stale +100 refused)", balance)
	}
	if err := tbl.Update(ctx, pool, 2, 9, "balance = 0"); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("update of a missing row = %v; want pgx.ErrNoRows", err)
	}
	if err := (fence.Table{Name: "x"}).Update(ctx, pool, 1, 1, "a = 1"); err == nil {
		t.Fatal("Table without columns must fail")
	}
}
