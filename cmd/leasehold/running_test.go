package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// What a partition's owner published as running (a live lease of token 3
// and its running row; the queue's tests cover the publishing) shows in
// `jobs list --state running`, `jobs show` and `status`; a row whose token
// is not the lease's is ignored.
func TestJobsRunning(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	ids := enqueueN(t, url, 3)
	ctx := context.Background()
	var part int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT partition FROM leasehold.jobs WHERE id = $1`, ids[1]).Scan(&part))
	_, err := pool.Exec(ctx, `
		INSERT INTO leasehold.leases (name, owner, token, acquired_at, renewed_at, expires_at)
		VALUES ('partition/g/' || $1::int, 'w1#1', 3, now(), now(), now() + interval '1 hour');
		`, part)
	pgtest.Must(t, err)
	publish := func(token int) {
		t.Helper()
		_, err := pool.Exec(ctx, `
			INSERT INTO leasehold.running (group_name, partition, token, worker, jobs, updated_at)
			VALUES ('g', $1, $2, 'w1', jsonb_build_array(jsonb_build_object('id', $3::bigint, 'kind', 'a',
			        'started_at', '2026-01-02T03:04:05Z')), now())
			ON CONFLICT (group_name, partition) DO UPDATE SET token = excluded.token`, part, token, ids[1])
		pgtest.Must(t, err)
	}
	publish(3)
	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "list", "--database-url", url, "--group", "g", "--state", "running"))
	if len(views) != 1 || views[0].ID != ids[1] || views[0].Running == nil || views[0].Running.Worker != "w1" {
		t.Fatalf("jobs list --state running: %+v; want job %d on w1", views, ids[1])
	}
	out, err := runIn(t, "", "jobs", "list", "--database-url", url, "--group", "g", "--state", "running")
	if err != nil || !strings.Contains(out, "w1") || !strings.Contains(out, "2026-01-02T03:04:05Z") {
		t.Fatalf("jobs list --state running (table): %v\n%s", err, out)
	}
	out, err = runIn(t, "", "jobs", "show", "--database-url", url, fmt.Sprint(ids[1]))
	if err != nil || !strings.Contains(out, "on worker w1 since 2026-01-02T03:04:05Z") {
		t.Fatalf("jobs show: %v\n%s", err, out)
	}
	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url, "--group", "g"))
	g := rep.Groups[0]
	if g.Running != 1 || g.Partitions[part].Running != 1 || len(g.Workers) != 1 || g.Workers[0].Worker != "w1" ||
		g.Workers[0].Running != 1 || fmt.Sprint(g.Workers[0].Partitions) != fmt.Sprint([]int{part}) {
		t.Fatalf("status: running %d, partition %+v, workers %+v; want 1 on w1", g.Running, g.Partitions[part], g.Workers)
	}
	out, err = runIn(t, "", "status", "--database-url", url, "--group", "g")
	if err != nil || !strings.Contains(out, "running now: 1 jobs") {
		t.Fatalf("status: %v\n%s", err, out)
	}

	// An older grant's row: not running.
	publish(2)
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "list", "--database-url", url, "--group", "g", "--state", "running"))
	if len(views) != 0 {
		t.Fatalf("jobs list --state running with a stale row: %+v; want none", views)
	}
	out, err = runIn(t, "", "jobs", "show", "--database-url", url, fmt.Sprint(ids[1]))
	if err != nil || strings.Contains(out, "running") {
		t.Fatalf("jobs show with a stale row: %v\n%s", err, out)
	}
}
