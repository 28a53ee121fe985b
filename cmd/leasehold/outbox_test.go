package main

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// outbox clear clears a recorded refusal (and says so), only refused
// partitions, and refuses a bad partition number.
func TestOutboxClear(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.outbox_heads (group_name, partition, next_seq, refused, refused_at)
		VALUES ('g', 3, 5, 'the progress is another outbox''s', now()), ('g', 4, 2, NULL, NULL)`)
	pgtest.Must(t, err)
	out, err := run(t, "outbox", "clear", "g", "--database-url", url)
	if err != nil || !strings.Contains(out, "partitions [3]") {
		t.Fatalf("outbox clear g: %v\n%s", err, out)
	}
	var adopt bool
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT refused IS NULL AND adopt FROM leasehold.outbox_heads WHERE partition = 3`).Scan(&adopt))
	if !adopt {
		t.Fatalf("partition 3 not cleared for adoption")
	}
	out, err = run(t, "outbox", "clear", "g", "3", "--database-url", url, "--json")
	if err != nil || !strings.Contains(out, `"cleared": []`) {
		t.Fatalf("a second clear: %v\n%s", err, out)
	}
	if out, err := run(t, "outbox", "clear", "g", "x", "--database-url", url); err == nil {
		t.Fatalf("a bad partition was accepted:\n%s", out)
	}
}
