package lease_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
)

// resetTokens puts the token sequence back to 1, as a restore, a dropped
// and re-created sequence or a logical replica would leave it.
func resetTokens(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(pgtest.Context(t), `ALTER SEQUENCE leasehold.lease_token_seq RESTART WITH 1`)
	pgtest.Must(t, err)
}

// accepted reports whether the queue's run record and the Kafka offset
// record (the tables that keep the highest token that wrote them) accept a
// write by token: the statements the queue and the Kafka consumer run.
func accepted(t *testing.T, pool *pgxpool.Pool, token fence.Token) (queue, kafka bool) {
	t.Helper()
	ctx := pgtest.Context(t)
	st, err := store.For("")
	pgtest.Must(t, err)
	var prev *int64
	var part int32
	var open bool
	pgtest.Must(t, pool.QueryRow(ctx, st.Queue.OpenRun, "g", []int32{0}, []int64{int64(token)}, []string{"test"}).Scan(&part, &prev, &open, &queue, nil, nil))
	var n int
	pgtest.Must(t, pool.QueryRow(ctx, st.Kafka.Advance, "g", "t", 0, int64(7), int64(token), int64(5)).Scan(&n))
	return queue, n == 1
}

// A token sequence behind the tokens stored in leasehold's tables (after a
// restore, say) is moved past them before a Client's first grant, so that
// the queue's run records and the Kafka offsets, which refuse a token lower
// than the last that wrote them, accept the new grant's token.
func TestFirstGrantIsAboveEveryStoredTokenAfterTheSequenceWasReset(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	old := newClient(t, pool, lease.Config{Owner: "old"})
	for range 3 {
		l, err := old.TryAcquire(ctx, "job")
		pgtest.Must(t, err)
		pgtest.Must(t, l.Release(ctx))
	}
	// Tokens stored by grants of before the reset.
	_, err := pool.Exec(ctx, `
		INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 1);
		INSERT INTO leasehold.queue_runs (group_name, partition, token, open) VALUES ('g', 0, 1000, false);
		INSERT INTO leasehold.kafka_offsets (group_name, topic, partition, next_offset, token) VALUES ('g', 't', 0, 5, 2000)`)
	pgtest.Must(t, err)
	resetTokens(t, pool)

	// Negative control: the reset really left the sequence behind. A
	// client that ran its guard before the reset gets a token the queue
	// and Kafka tables refuse.
	stale, err := old.TryAcquire(ctx, "control")
	pgtest.Must(t, err)
	if q, k := accepted(t, pool, stale.Token()); stale.Token() >= 2000 || q || k {
		t.Fatalf("control: a grant after the reset has token %v (queue accepts: %v, kafka: %v); "+
			"want a token below the stored ones, refused by both: the test proves nothing", stale.Token(), q, k)
	}

	fresh := newClient(t, pool, lease.Config{Owner: "new"})
	l, err := fresh.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	if l.Token() <= 2000 {
		t.Fatalf("first grant after the reset has token %v; want above every stored token (2000)", l.Token())
	}
	if q, k := accepted(t, pool, l.Token()); !q || !k {
		t.Fatalf("token %v: queue run accepted %v, kafka offset accepted %v; want both", l.Token(), q, k)
	}
	// Later grants keep increasing, and the guard never moves the sequence
	// back: a second client finds it ahead and leaves it.
	l2, err := newClient(t, pool, lease.Config{Owner: "later"}).TryAcquire(ctx, "other")
	pgtest.Must(t, err)
	if l2.Token() != l.Token()+1 {
		t.Fatalf("next grant: token %v; want %v", l2.Token(), l.Token()+1)
	}
}

// Tokens stored outside leasehold's tables (a fence.Table) are the
// operator's to feed to the guard: MaxToken reads them, GuardTokens moves
// the sequence past them.
func TestGuardTokensMovesPastAFencedTablesTokens(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL, token bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts VALUES (1, 10, 4000), (2, 20, 0)`)
	pgtest.Must(t, err)
	accounts := fence.Table{Name: "accounts", KeyColumn: "id", TokenColumn: "token"}
	c := newClient(t, pool, lease.Config{Owner: "w"})
	l, err := c.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	// Without the guard, the grant's token is refused by the table.
	if err := accounts.Update(ctx, pool, 1, l.Token(), "balance = balance + 1"); err == nil {
		t.Fatalf("control: token %v updated a row written by token 4000", l.Token())
	}
	max, err := accounts.MaxToken(ctx, pool)
	pgtest.Must(t, err)
	if max != 4000 {
		t.Fatalf("MaxToken = %v; want 4000", max)
	}
	pgtest.Must(t, c.GuardTokens(ctx, max))
	pgtest.Must(t, l.Release(ctx))
	l, err = c.TryAcquire(ctx, "job")
	pgtest.Must(t, err)
	if l.Token() <= 4000 {
		t.Fatalf("grant after GuardTokens(4000): token %v; want above 4000", l.Token())
	}
	pgtest.Must(t, accounts.Update(ctx, pool, 1, l.Token(), "balance = balance + 1"))
	// Guarding below the sequence changes nothing.
	pgtest.Must(t, c.GuardTokens(ctx, 5))
	l2, err := c.TryAcquire(ctx, "other")
	pgtest.Must(t, err)
	if l2.Token() != l.Token()+1 {
		t.Fatalf("grant after GuardTokens(5): token %v; want %v (never moved back)", l2.Token(), l.Token()+1)
	}
}
