package ui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/ui"
)

// seedOutbox writes n segments of recs records each into the outbox of
// "emails"'s partition p, as the runners seal them: numbered from first
// (after earlier ones, published and deleted), the oldest committed
// minutes ago, the partition's head after the last.
func (e *env) seedOutbox(p, first, n, recs, minutes int) {
	e.t.Helper()
	ctx := pgtest.Context(e.t)
	_, err := e.pool.Exec(ctx, `INSERT INTO leasehold.outbox_heads (group_name, partition, next_seq) VALUES ('emails', $1, $2)`, p, first+n)
	pgtest.Must(e.t, err)
	_, err = e.pool.Exec(ctx, `
		INSERT INTO leasehold.outbox_segments (group_name, partition, seq, scope, records, token, committed_at)
		SELECT 'emails', $1, s, (1000000 * ($1 + 1) + s), $4, 1,
		       clock_timestamp() - make_interval(mins => $5) + (s - $2) * interval '1 millisecond'
		FROM generate_series($2::bigint, $2 + $3 - 1) AS s`, p, first, n, recs, minutes)
	pgtest.Must(e.t, err)
}

// The group page's #outbox region is empty for a group that never used
// the outbox; with segments waiting it shows one row per partition that
// has some (segments, records, a lower bound past admin.OutboxCounted
// segments, the oldest's age, the owner and token), in partition order;
// once they are published, a note that nothing waits.
func TestGroupShowsOutbox(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	r := e.page("/groups/emails")
	box := byID(r.Doc, "outbox")
	if box == nil || !hasAttr(box, "data-live") {
		t.Fatal("no live #outbox region: a section could not appear on a live update")
	}
	if strings.TrimSpace(text(box)) != "" || len(all(box, func(n *nodeT) bool { return n.Data == "table" })) != 0 {
		t.Errorf("#outbox of a group without an outbox: %q; want it empty", text(box))
	}

	// Partition 1, held by w1: 3 segments of 2 records (4 more were
	// published before), the oldest 5 minutes old; partition 3, never
	// granted: more segments than are counted.
	_, err := e.pool.Exec(ctx, `
		INSERT INTO leasehold.leases (name, owner, token, acquired_at, renewed_at, expires_at)
		VALUES ('partition/emails/1', 'w1#inc1', 41, now(), now(), now() + interval '1 hour')`)
	pgtest.Must(t, err)
	e.seedOutbox(1, 5, 3, 2, 5)
	e.seedOutbox(3, 1, admin.OutboxCounted+2, 1, 2)

	r = e.page("/groups/emails")
	box = byID(r.Doc, "outbox")
	rows := all(box, func(n *nodeT) bool { return n.Data == "tr" && hasAttr(n, "data-outbox-partition") })
	if len(rows) != 2 {
		t.Fatalf("#outbox: %d partition rows; want 2: %q", len(rows), text(box))
	}
	want := []struct{ partition, text string }{
		{"1", "1 3 6 5m ago w1 (token 41)"},
		{"3", fmt.Sprintf("3 %d %d+ 2m ago never granted", admin.OutboxCounted+2, admin.OutboxCounted)},
	}
	for i, w := range want {
		if got := text(rows[i]); attr(rows[i], "data-outbox-partition") != w.partition || got != w.text {
			t.Errorf("outbox row %d: partition %s, %q; want %s, %q", i, attr(rows[i], "data-outbox-partition"), got, w.partition, w.text)
		}
	}
	if got, want := text(byID(box, "outbox-summary")), fmt.Sprintf("%d segments, %d+ records waiting in 2 partitions",
		admin.OutboxCounted+5, admin.OutboxCounted+6); got != want {
		t.Errorf("#outbox-summary %q; want %q", got, want)
	}

	// Published: the segments are deleted, the heads stay.
	_, err = e.pool.Exec(ctx, `DELETE FROM leasehold.outbox_segments`)
	pgtest.Must(t, err)
	r = e.page("/groups/emails")
	box = byID(r.Doc, "outbox")
	if !strings.Contains(text(box), "Nothing waits") || len(all(box, func(n *nodeT) bool { return n.Data == "tr" })) != 0 {
		t.Errorf("#outbox once published: %q; want the note that nothing waits", text(box))
	}
}

// An outbox that cannot be read is shown in its place by its error id,
// not the database's error text; the rest of the page is served.
func TestGroupOutboxErrorIsNotShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	_, err := e.pool.Exec(pgtest.Context(t), "ALTER TABLE leasehold.outbox_heads RENAME TO outbox_heads_secret_gone")
	pgtest.Must(t, err)
	r := e.page("/groups/emails")
	errs := all(byID(r.Doc, "outbox"), func(n *nodeT) bool { return hasClass(n, "error") })
	if len(errs) != 1 || byID(r.Doc, "partitions") == nil {
		t.Fatalf("the group page: %d errors in #outbox, ownership map %v; want the outbox's error and the map", len(errs), byID(r.Doc, "partitions") != nil)
	}
	checkHidden(t, e.log, "the group's outbox", r, text(errs[0]), "/groups/emails", "ERROR",
		[]string{"does not exist", "outbox_heads", "42P01", "relation"})
}
