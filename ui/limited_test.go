package ui_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/ui"
)

// The group page's live #limits region shows the keys held back by limits
// that the partitions' owners published (a live grant's running row, as
// the queue's publisher writes it; the queue's tests cover the
// publishing), busiest first, with the jobs held back per limit, and the
// limits the kinds declare; a row no live grant stands behind is not
// trusted. With nothing held back, a note says so.
func TestGroupShowsLimits(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	r := e.page("/groups/emails")
	box := byID(r.Doc, "limits")
	if box == nil || !hasAttr(box, "data-live") {
		t.Fatal("no live #limits region: the section would not follow live updates")
	}
	if !strings.Contains(text(box), "No job is held back by a limit") || byID(box, "limits-keys") != nil {
		t.Errorf("#limits with nothing held back: %q; want the note", text(box))
	}
	if got := text(byID(box, "limits-summary")); got != "0 jobs held back · key_concurrency 0 · key_rate 0 · group_concurrency 0" {
		t.Errorf("#limits-summary with nothing held back: %q", got)
	}

	// Partition 1, held by w1 with token 41, holds back two keys;
	// partition 3's row has no live grant behind it.
	_, err := e.pool.Exec(ctx, `
		INSERT INTO leasehold.leases (name, owner, token, acquired_at, renewed_at, expires_at)
		VALUES ('partition/emails/1', 'w1#inc1', 41, now(), now(), now() + interval '1 hour');
		INSERT INTO leasehold.running (group_name, partition, token, worker, jobs, limited, updated_at) VALUES
		('emails', 1, 41, 'w1', '[]', '[{"key": "user-<7>", "kind": "sync", "limit": "key_concurrency", "waiting": 5},
		                              {"key": "user-9", "kind": "rated", "limit": "key_rate", "waiting": 2}]', now()),
		('emails', 3, 7, 'gone', '[]', '[{"key": "stale", "kind": "sync", "limit": "key_rate", "waiting": 99}]', now());
		INSERT INTO leasehold.group_kinds (group_name, kind, limits) VALUES
		('emails', 'rated', '{"key_concurrency": 1, "key_rate_starts": 10, "key_rate_per_ms": 60000, "group_concurrency": 4}'),
		('emails', 'plain', '{"key_concurrency": 1, "key_rate_starts": 0, "key_rate_per_ms": 0, "group_concurrency": 0}')`)
	pgtest.Must(t, err)

	r = e.page("/groups/emails")
	box = byID(r.Doc, "limits")
	rows := all(box, func(n *nodeT) bool { return n.Data == "tr" && hasAttr(n, "data-limited-key") })
	want := []struct{ key, text string }{
		{"user-<7>", "user-<7> sync key_concurrency 5 1 w1 (token 41)"},
		{"user-9", "user-9 rated key_rate 2 1 w1 (token 41)"},
	}
	if len(rows) != len(want) {
		t.Fatalf("#limits: %d key rows; want %d: %q", len(rows), len(want), text(box))
	}
	for i, w := range want {
		if got := text(rows[i]); attr(rows[i], "data-limited-key") != w.key || got != w.text {
			t.Errorf("limits row %d: key %q, %q; want %q, %q", i, attr(rows[i], "data-limited-key"), got, w.key, w.text)
		}
	}
	if got, want := text(byID(box, "limits-summary")), "7 jobs held back · key_concurrency 5 · key_rate 2 · group_concurrency 0"; got != want {
		t.Errorf("#limits-summary %q; want %q", got, want)
	}
	declared := all(byID(box, "limits-declared"), func(n *nodeT) bool { return n.Data == "tr" && hasAttr(n, "data-limits-kind") })
	if len(declared) != 1 || text(declared[0]) != "rated 1 10 per 1m 4" {
		var got []string
		for _, d := range declared {
			got = append(got, text(d))
		}
		t.Errorf("declared limits %q; want only rated's (plain declares the default)", got)
	}
}
