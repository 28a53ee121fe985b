package leasehold_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// Migrate moves a token sequence that is behind the tokens stored in
// leasehold's tables (every token column: lease rows, queue runs, Kafka
// offsets, finished jobs) past them, and never moves it back.
func TestMigrateMovesTheTokenSequencePastStoredTokens(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	db := open(t, pool, "")
	next := func() int64 {
		t.Helper()
		var n int64
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT nextval('leasehold.lease_token_seq')`).Scan(&n))
		return n
	}
	for _, tc := range []struct {
		table string
		sql   string
	}{
		{"leases", `INSERT INTO leasehold.leases VALUES ('l', 'o', 1000, now(), now(), now())`},
		{"queue_runs", `INSERT INTO leasehold.queue_runs VALUES ('g', 0, 2000, false)`},
		{"kafka_offsets", `INSERT INTO leasehold.kafka_offsets (group_name, topic, partition, next_offset, token)
			VALUES ('g', 't', 0, 0, 3000)`},
		{"jobs", `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, state, max_attempts, run_at, finished_token)
			VALUES ('g', 0, '', 'k', '{}', 'completed', 1, now(), 4000)`},
	} {
		if tc.table == "leases" {
			_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 1)`)
			pgtest.Must(t, err)
		}
		_, err := pool.Exec(ctx, tc.sql)
		pgtest.Must(t, err)
		_, err = pool.Exec(ctx, `ALTER SEQUENCE leasehold.lease_token_seq RESTART WITH 1`)
		pgtest.Must(t, err)
		pgtest.Must(t, db.Migrate(ctx))
		var stored int64
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT max(t) FROM (
			SELECT max(token) FROM leasehold.leases UNION ALL SELECT max(token) FROM leasehold.queue_runs
			UNION ALL SELECT max(token) FROM leasehold.kafka_offsets UNION ALL SELECT max(finished_token) FROM leasehold.jobs) AS m(t)`).Scan(&stored))
		if n := next(); n <= stored {
			t.Fatalf("after a %s token %d, a reset and Migrate: next token %d; want above %d", tc.table, stored, n, stored)
		}
	}
	_, err := pool.Exec(ctx, `SELECT setval('leasehold.lease_token_seq', 10000)`)
	pgtest.Must(t, err)
	pgtest.Must(t, db.Migrate(ctx))
	if n := next(); n != 10001 {
		t.Fatalf("Migrate with the sequence ahead: next token %d; want 10001 (never moved back)", n)
	}
}
