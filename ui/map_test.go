package ui_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// alerts returns the partitions the ownership map marks as alerts, and
// the text of their status cells.
func alerts(e *env) (map[string]string, response) {
	r := e.page("/groups/emails")
	out := map[string]string{}
	for _, row := range all(byID(r.Doc, "partitions"), func(n *nodeT) bool { return hasAttr(n, "data-partition") }) {
		if hasClass(row, "alert") {
			out[attr(row, "data-partition")] = text(cell(row, "status"))
		}
	}
	return out, r
}

// The ownership map makes unowned and lagging partitions stand out (class
// alert, with the reason), and only them: with no worker every partition
// is an alert; with a worker holding them none is; with the group paused
// and a job waiting past LagAlert, its partition alone is, as lagging.
func TestOwnershipMapAlerts(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{LagAlert: 300 * time.Millisecond})
	got, r := alerts(e)
	if len(got) != 4 || got["0"] != "unowned" {
		t.Fatalf("no worker: alerts %v; want the 4 partitions unowned", got)
	}
	if lg := text(r.Doc); !strings.Contains(lg, "unowned (no lease granted") {
		t.Error("no legend")
	}

	// Paused before the worker starts, the group's jobs wait from the
	// worker's first fetch: none runs before it knows.
	pgtest.Must(t, e.q.Pause(ctx, "emails", "", "test"))
	e.startWorkers(1)
	e.waitHeld()
	// Eventually: on a loaded machine a renewal may come late, and a lease
	// of 2s lapse for a moment.
	eventually(t, func() error {
		if got, _ := alerts(e); len(got) != 0 {
			return fmt.Errorf("every partition held, nothing due: alerts %v; want none", got)
		}
		return nil
	})

	res, err := e.q.Enqueue(ctx, queue.Job{Group: "emails", Key: "late", Args: note{Text: "x"}})
	pgtest.Must(t, err)
	want := fmt.Sprint(res.Partition)
	eventually(t, func() error {
		got, _ := alerts(e)
		if len(got) != 1 || got[want] != "lagging" {
			return fmt.Errorf("a job waiting in partition %s past LagAlert: alerts %v; want partition %s lagging alone", want, got, want)
		}
		return nil
	})
	r = e.page("/groups/emails")
	if !strings.Contains(text(byID(r.Doc, "pauses")), "the whole group paused") {
		t.Errorf("#pauses = %q", text(byID(r.Doc, "pauses")))
	}
}

// mapRow is a partition's row of the ownership map, as text.
type mapRow struct {
	Owner, Token, Expires string
	Alert                 bool
	Status                string
}

// mapRows reads the ownership map's rows of page r, by partition.
func mapRows(r response) map[int]mapRow {
	out := map[int]mapRow{}
	for _, row := range all(byID(r.Doc, "partitions"), func(n *nodeT) bool { return hasAttr(n, "data-partition") }) {
		var p int
		fmt.Sscan(attr(row, "data-partition"), &p)
		out[p] = mapRow{Owner: text(cell(row, "owner")), Token: text(cell(row, "token")), Expires: text(cell(row, "expires")),
			Alert: hasClass(row, "alert"), Status: text(cell(row, "status"))}
	}
	return out
}

// checkMap compares the ownership map of r with st, partition by partition:
// the owner, the token, and whether the lease is held (an unexpired
// expiry, no alert for it) or not (an alert).
func checkMap(r response, st admin.GroupStatus) error {
	rows := mapRows(r)
	if len(rows) != len(st.Partitions) {
		return fmt.Errorf("%d partition rows; want %d", len(rows), len(st.Partitions))
	}
	for _, p := range st.Partitions {
		row := rows[p.Partition]
		owner, token := "–", "–"
		if p.Owner != "" {
			owner = p.Owner
		}
		if p.Token != 0 {
			token = fmt.Sprint(p.Token)
		}
		switch {
		case row.Owner != owner || row.Token != token:
			return fmt.Errorf("partition %d: owner %q token %q; want %q %q", p.Partition, row.Owner, row.Token, owner, token)
		case p.Held && (row.Alert || strings.Contains(row.Expires, "expired") || row.Expires == "never granted"):
			return fmt.Errorf("partition %d is held: row %+v shows it otherwise", p.Partition, row)
		case !p.Held && !row.Alert:
			return fmt.Errorf("partition %d is not held: row %+v is no alert", p.Partition, row)
		}
	}
	return nil
}

// The ownership map shows each partition's owner, token and lease as the
// database has them (admin.ReadStatus): leases granted to a client that
// never renews them, one then forced expired in SQL, which the map shows
// as "expired" with class alert and the reason; the others stay held, and
// the never-granted ones are unowned alerts. The negative control: checkMap
// rejects the page against a doctored status.
func TestOwnershipMapMatchesStatus(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	lc, err := lease.New(pgtest.DBOn(t, e.pool), lease.Config{Owner: "ghost", TTL: time.Hour})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	for _, p := range []int{0, 1} {
		_, err := lc.TryAcquire(ctx, partition.LeaseName("emails", p))
		pgtest.Must(t, err)
	}
	status := func() admin.GroupStatus {
		st, err := admin.ReadStatus(ctx, e.db, []string{"emails"})
		pgtest.Must(t, err)
		return st.Groups[0]
	}
	st := status()
	r := e.page("/groups/emails")
	if err := checkMap(r, st); err != nil {
		t.Fatal(err)
	}
	if rows := mapRows(r); rows[0].Owner != "ghost" || rows[0].Alert || !rows[2].Alert || rows[2].Status != "unowned" {
		t.Fatalf("rows %+v; want partitions 0 and 1 held by ghost, 2 and 3 unowned alerts", rows)
	}

	_, err = e.pool.Exec(ctx, `UPDATE leasehold.leases SET expires_at = now() - interval '1s' WHERE name = $1`, partition.LeaseName("emails", 1))
	pgtest.Must(t, err)
	st = status()
	if st.Partitions[1].Held {
		t.Fatal("ReadStatus: partition 1 still held after its lease was forced expired")
	}
	r = e.page("/groups/emails")
	if err := checkMap(r, st); err != nil {
		t.Fatal(err)
	}
	row := mapRows(r)[1]
	if !row.Alert || !strings.HasPrefix(row.Expires, "expired") || row.Status != "lease expired" || row.Owner != "ghost" {
		t.Errorf("partition 1, its lease forced expired: %+v; want owner ghost, expired, an alert saying lease expired", row)
	}
	if row := mapRows(r)[0]; row.Alert {
		t.Errorf("partition 0, held: %+v is an alert", row)
	}

	// The negative control: a status doctored in owner, token or held is
	// caught.
	for _, doctor := range []func(*admin.GroupStatus){
		func(g *admin.GroupStatus) { g.Partitions[0].Owner = "someone-else" },
		func(g *admin.GroupStatus) { g.Partitions[0].Token++ },
		func(g *admin.GroupStatus) { g.Partitions[1].Held = true },
		func(g *admin.GroupStatus) { g.Partitions[0].Held = false },
	} {
		d := status()
		d.Partitions = slices.Clone(d.Partitions)
		doctor(&d)
		if checkMap(r, d) == nil {
			t.Errorf("checkMap accepts the page against a doctored status %+v", d.Partitions)
		}
	}
}
