package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// member starts a partition member of group with an idle Run and waits
// until it holds every partition.
func member(t *testing.T, pool *pgxpool.Pool, group, id string, n int) {
	t.Helper()
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: group, Partitions: n, ID: id,
		Run:   func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() },
		Lease: lease.Config{TTL: 10 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		m.Stop(ctx)
	})
	for start := time.Now(); len(m.Owned()) < n; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("member %s holds %d of %d partitions after 30s", id, len(m.Owned()), n)
		}
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	member(t, pool, "g", "w1", 4)
	// Jobs: two due in k1's partition (one an hour overdue, one failed
	// once), one scheduled in k2's.
	k1, k2 := "k1", "k2"
	for partition.OfString(k2, 4) == partition.OfString(k1, 4) {
		k2 += "x"
	}
	in := fmt.Sprintf(`{"group":"g","kind":"a","key":%q}
{"group":"g","kind":"a","key":%q}
{"group":"g","kind":"a","key":%q,"delay":"1h"}`, k1, k1, k2)
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, in, "enqueue", "--database-url", url, "-"))
	_, err := pool.Exec(context.Background(), `UPDATE leasehold.jobs SET run_at = clock_timestamp() - interval '1 hour' WHERE id = $1;`, res[0].ID)
	pgtest.Must(t, err)
	_, err = pool.Exec(context.Background(), `UPDATE leasehold.jobs SET attempt = 1 WHERE id = $1`, res[1].ID)
	pgtest.Must(t, err)

	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 1 {
		t.Fatalf("groups %+v", rep.Groups)
	}
	g := rep.Groups[0]
	if g.Group != "g" || g.PartitionCount != 4 || g.Held != 4 || g.LiveMembers != 1 || g.Pending != 2 ||
		g.Scheduled != 1 || g.Retrying != 1 || g.OldestDueMS < time.Hour.Milliseconds() {
		t.Errorf("group summary %+v", g)
	}
	if len(g.Members) != 1 || g.Members[0].ID != "w1" || !g.Members[0].Live || g.Members[0].Incarnation == "" ||
		!slices.Equal(g.Members[0].Partitions, []int{0, 1, 2, 3}) || g.Members[0].HeartbeatAgeMS > 10_000 {
		t.Errorf("members %+v", g.Members)
	}
	p1, p2 := partition.OfString(k1, 4), partition.OfString(k2, 4)
	for _, p := range g.Partitions {
		if p.Owner != "w1" || p.Incarnation != g.Members[0].Incarnation || p.Token <= 0 || !p.Held ||
			p.Desired != "w1" || p.ExpiresInMS == nil || *p.ExpiresInMS <= 0 || *p.ExpiresInMS > 10_000 {
			t.Errorf("partition %+v (expires in %v)", p, p.ExpiresInMS)
		}
		want := [3]int64{}
		switch p.Partition {
		case p1:
			want = [3]int64{2, 0, 1}
		case p2:
			want = [3]int64{0, 1, 0}
		}
		if got := [3]int64{p.Pending, p.Scheduled, p.Retrying}; got != want {
			t.Errorf("partition %d: pending, scheduled, retrying %v; want %v", p.Partition, got, want)
		}
	}

	out, err := runIn(t, "", "status", "--database-url", url, "--group", "g")
	pgtest.Must(t, err)
	for _, want := range []string{"group g: 4 partitions (4 held), members: 1 live; jobs: 2 pending, 1 scheduled, 1 retrying",
		"PARTITION", "MEMBER"} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	memberRow := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		memberRow = memberRow || len(f) > 4 && slices.Equal(f[:4], []string{"w1", g.Members[0].Incarnation, "yes", "4"})
	}
	if !memberRow {
		t.Errorf("no member row for w1 with its incarnation and 4 partitions:\n%s", out)
	}
	if rows := strings.Count(out, "\n"+fmt.Sprint(p1)+"  "); rows != 1 {
		t.Errorf("partition %d: %d rows:\n%s", p1, rows, out)
	}
}

// Many partitions: the table lists the partitions that are not idle, and
// says how many it left out; --all and --json list every one.
func TestStatusManyPartitions(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	// A member holding every lease, written directly, so that nothing
	// renews the one expired.
	_, err := pool.Exec(context.Background(), `
		INSERT INTO leasehold.groups (name, partitions) VALUES ('big', 40);
		INSERT INTO leasehold.members (group_name, id, incarnation, joined_at, heartbeat_at, expires_at)
		VALUES ('big', 'w1', 'inc1', now(), now(), now() + interval '1 hour');
		INSERT INTO leasehold.leases (name, owner, token, acquired_at, renewed_at, expires_at)
		SELECT 'partition/big/' || p, 'w1#inc1', p + 1, now(), now(),
		       now() + CASE WHEN p = 7 THEN -interval '1 second' ELSE interval '1 hour' END
		FROM generate_series(0, 39) AS p`)
	pgtest.Must(t, err)
	_, err = runIn(t, "", "enqueue", "--database-url", url, "--group", "big", "--kind", "a", "--key", "x")
	pgtest.Must(t, err)
	px := partition.OfString("x", 40)

	rows := func(out string) []string {
		var ps []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == "w1" {
				ps = append(ps, f[0])
			}
		}
		return ps
	}
	out, err := runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	want := []string{fmt.Sprint(min(px, 7)), fmt.Sprint(max(px, 7))}
	if px == 7 {
		want = want[:1]
	}
	if got := rows(out); !slices.Equal(got, want) || !strings.Contains(out, fmt.Sprintf("(%d idle partitions not listed", 40-len(want))) {
		t.Errorf("partitions listed %v; want %v:\n%s", got, want, out)
	}
	if !strings.Contains(out, "expired") {
		t.Errorf("the expired lease is not shown as such:\n%s", out)
	}
	out, err = runIn(t, "", "status", "--database-url", url, "--all")
	pgtest.Must(t, err)
	if got := rows(out); len(got) != 40 || strings.Contains(out, "not listed") {
		t.Errorf("--all lists %d partitions:\n%s", len(got), out)
	}
	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 1 || len(rep.Groups[0].Partitions) != 40 || rep.Groups[0].Held != 39 ||
		len(rep.Groups[0].Members) != 1 || len(rep.Groups[0].Members[0].Partitions) != 39 {
		t.Errorf("--json: %+v", rep.Groups)
	}
}

func TestStatusGroups(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 0 || rep.Now.IsZero() {
		t.Errorf("no groups: %+v", rep)
	}
	out, err := runIn(t, "", "status", "--database-url", url)
	if err != nil || !strings.Contains(out, "no groups") {
		t.Errorf("no groups: %q, %v", out, err)
	}
	pool := pgtest.PoolURL(t, url)
	_, err = pool.Exec(context.Background(), `INSERT INTO leasehold.groups (name, partitions) VALUES ('a', 2), ('b', 3)`)
	pgtest.Must(t, err)
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 2 || rep.Groups[0].Group != "a" || rep.Groups[1].PartitionCount != 3 ||
		rep.Groups[1].Partitions[2].Owner != "" || rep.Groups[1].Partitions[2].ExpiresInMS != nil {
		t.Errorf("two groups, no members: %+v", rep.Groups)
	}
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url, "--group", "b"))
	if len(rep.Groups) != 1 || rep.Groups[0].Group != "b" {
		t.Errorf("--group b: %+v", rep.Groups)
	}
	_, err = runIn(t, "", "status", "--database-url", url, "--group", "nope")
	if !errors.Is(err, partition.ErrGroupNotFound) {
		t.Errorf("unknown group: %v; want ErrGroupNotFound", err)
	}
}

// Keys whose due jobs wait behind a job that is not due are listed, the
// most held up first; a non-blocking job holds nothing up.
func TestStatusWaits(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	in := `{"group":"g","kind":"a","key":"s","delay":"1h"}
{"group":"g","kind":"a","key":"s"}
{"group":"g","kind":"a","key":"s"}
{"group":"g","kind":"a","key":"r"}
{"group":"g","kind":"a","key":"r"}
{"group":"g","kind":"a","key":"n","delay":"1h","ordering":"non-blocking"}
{"group":"g","kind":"a","key":"n"}`
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, in, "enqueue", "--database-url", url, "-"))
	// r's first job failed once and retries in 10 minutes.
	_, err := pool.Exec(context.Background(), `UPDATE leasehold.jobs SET attempt = 1, run_at = clock_timestamp() + interval '10 minutes' WHERE id = $1`, res[3].ID)
	pgtest.Must(t, err)

	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 1 {
		t.Fatalf("groups %+v", rep.Groups)
	}
	if !rep.Groups[0].BacklogAt.Equal(rep.Now) {
		t.Errorf("backlog_at %v; want the report's now %v: the command counts as it reads", rep.Groups[0].BacklogAt, rep.Now)
	}
	ws := rep.Groups[0].Waits
	want := []admin.WaitStatus{
		{Partition: partition.OfString("s", 8), Key: "s", JobID: res[0].ID, Waiting: 2},
		{Partition: partition.OfString("r", 8), Key: "r", JobID: res[3].ID, Attempt: 1, Waiting: 1},
	}
	if len(ws) != len(want) {
		t.Fatalf("waits %+v; want %+v", ws, want)
	}
	for i, w := range ws {
		due := []time.Duration{time.Hour, 10 * time.Minute}[i]
		in := time.Duration(w.DueInMS) * time.Millisecond
		if in <= due-time.Minute || in > due || (w.RunAt.Sub(rep.Now)-in).Abs() >= time.Millisecond {
			t.Errorf("wait %d: due in %v at %v (now %v); want about %v", i, in, w.RunAt, rep.Now, due)
		}
		w.RunAt, w.DueInMS = time.Time{}, 0
		if w != want[i] {
			t.Errorf("wait %d: %+v; want %+v", i, w, want[i])
		}
	}

	out, err := runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	sec := strings.Index(out, "keys waiting behind a job:\n")
	members := strings.Index(out, "no members")
	if sec < 0 || members < sec {
		t.Fatalf("no waits section before the members:\n%s", out)
	}
	var lines [][]string
	for _, l := range strings.Split(out[sec:members], "\n")[2:] {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, f)
		}
	}
	wantRows := [][]string{
		{fmt.Sprint(want[0].Partition), `"s"`, fmt.Sprint(res[0].ID), "", "0", "(scheduled)", "2"},
		{fmt.Sprint(want[1].Partition), `"r"`, fmt.Sprint(res[3].ID), "", "1", "(retrying)", "1"},
	}
	for i, f := range lines {
		if i >= len(wantRows) || len(f) != 7 {
			t.Errorf("waits row %q; want %d rows like %q", f, len(wantRows), wantRows[0])
			continue
		}
		f[3] = "" // due in
		if !slices.Equal(f, wantRows[i]) {
			t.Errorf("waits row %q; want %q", f, wantRows[i])
		}
	}
	if len(lines) != len(wantRows) {
		t.Errorf("%d waits rows; want %d:\n%s", len(lines), len(wantRows), out)
	}

	// No waits: no section, and an empty array.
	_, err = pool.Exec(context.Background(), `UPDATE leasehold.jobs SET run_at = clock_timestamp() WHERE id = ANY($1)`, []int64{res[0].ID, res[3].ID})
	pgtest.Must(t, err)
	var due admin.Status
	pgtest.Must(t, runJSON(t, &due, "", "status", "--database-url", url))
	if len(due.Groups) != 1 || due.Groups[0].Waits == nil || len(due.Groups[0].Waits) != 0 {
		t.Errorf("waits once due: %+v", due.Groups)
	}
	out, err = runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	if strings.Contains(out, "waiting behind") {
		t.Errorf("a waits section without waits:\n%s", out)
	}
}
