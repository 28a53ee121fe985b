package leaseholdtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

// Two DBs on one pool are two schemas: a job enqueued in one is not seen
// in the other, and each schema is dropped when its test ends.
func TestDBIsolatesAndDrops(t *testing.T) {
	ctx := context2m(t)
	pool := leaseholdtest.Pool(t)
	var schemas []string
	t.Run("two", func(t *testing.T) {
		a, b := leaseholdtest.DB(t, pool), leaseholdtest.DB(t, pool)
		if a.Schema() == b.Schema() {
			t.Fatalf("both DBs have schema %s", a.Schema())
		}
		schemas = append(schemas, a.Schema(), b.Schema())
		enqueue(t, a, queue.Job{Group: "g", Args: Greeting{"Ada"}})
		leaseholdtest.RequireEnqueued[Greeting](ctx, t, a, nil)
		leaseholdtest.RequireNotEnqueued[Greeting](ctx, t, b, nil)
		// The negative control: the same assertion fails on a.
		mustFail(t, func(tb testing.TB) { leaseholdtest.RequireNotEnqueued[Greeting](ctx, tb, a, nil) }, `kind "greeting"`)
	})
	for _, s := range schemas {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, s).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("schema %s still exists after its test", s)
		}
	}
}

// Group creates a group once; another count for it fails the test.
func TestGroup(t *testing.T) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "g", 3)
	leaseholdtest.Group(ctx, t, db, "g", 3) // idempotent
	enqueue(t, db, queue.Job{Group: "g", Args: Greeting{"Ada"}})
	mustFail(t, func(tb testing.TB) { leaseholdtest.Group(ctx, tb, db, "g", 5) }, `group "g"`)
}

// Tx's unqualified tables land in the test's schema, and its rollback at
// the end of the test takes them away.
func TestTx(t *testing.T) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	exists := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) bool {
		var ok bool
		must(t, q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, db.Schema()+".things").Scan(&ok))
		return ok
	}
	t.Run("in", func(t *testing.T) {
		tx := leaseholdtest.Tx(ctx, t, db)
		_, err := tx.Exec(ctx, `CREATE TABLE things (id int)`)
		must(t, err)
		if !exists(tx) {
			t.Fatalf("the table is not in the test's schema %s", db.Schema())
		}
	})
	if exists(db.Pool()) {
		t.Fatal("the table outlived the test's transaction")
	}
}

// Pool does not read DATABASE_URL, which often names a developer's working
// database: pointed at no server, it is ignored.
func TestPoolIgnoresDatabaseURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/not_for_tests?connect_timeout=2")
	pool := leaseholdtest.Pool(t)
	ctx := context2m(t)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
}
