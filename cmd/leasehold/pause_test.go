package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// pause and resume store and remove the pause rows workers read, and
// status shows them; an unknown group is refused.
func TestPauseResumeCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pgtest.Must(t, ignoreOut(runIn(t, "", "groups", "create", "mail", "--partitions", "4", "--database-url", url)))
	out, err := runIn(t, "", "pause", "mail", "--reason", "deploy", "--database-url", url)
	if err != nil || !strings.Contains(out, "paused group mail") {
		t.Fatalf("pause: %q, %v", out, err)
	}
	pgtest.Must(t, ignoreOut(runIn(t, "", "pause", "mail", "--kind", "welcome", "--database-url", url)))
	var st admin.Status
	pgtest.Must(t, runJSON(t, &st, "", "status", "--database-url", url))
	if len(st.Groups) != 1 || len(st.Groups[0].Paused) != 2 || st.Groups[0].Paused[0].Kind != "" ||
		st.Groups[0].Paused[0].Reason != "deploy" || st.Groups[0].Paused[1].Kind != "welcome" {
		t.Fatalf("status --json after two pauses: %+v", st.Groups)
	}
	out, err = runIn(t, "", "status", "--database-url", url)
	if err != nil || !strings.Contains(out, "PAUSED: the whole group") || !strings.Contains(out, ": deploy") ||
		!strings.Contains(out, "PAUSED: kind welcome") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	pgtest.Must(t, ignoreOut(runIn(t, "", "resume", "mail", "--database-url", url)))
	pgtest.Must(t, runJSON(t, &st, "", "status", "--database-url", url))
	if ps := st.Groups[0].Paused; len(ps) != 1 || ps[0].Kind != "welcome" {
		t.Fatalf("after resuming the group: %+v; want the kind still paused", ps)
	}
	if _, err := runIn(t, "", "pause", "nope", "--database-url", url); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("pause of an unknown group: %v; want ErrUnknownGroup", err)
	}
}

func ignoreOut(_ string, err error) error { return err }

// enqueue --priority stores the priority, jobs show and the --stdin line
// field carry it, and a priority out of 1..4 is refused.
func TestEnqueuePriority(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pgtest.Must(t, ignoreOut(runIn(t, "", "groups", "create", "mail", "--partitions", "4", "--database-url", url)))
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, "", "enqueue", "--group", "mail", "--kind", "welcome", "--priority", "3", "--database-url", url))
	var res2 []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res2, `{"kind": "welcome", "priority": 2}`+"\n", "enqueue", "--stdin", "--group", "mail", "--database-url", url))
	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "show", "--database-url", url, fmt.Sprint(res[0].ID), fmt.Sprint(res2[0].ID)))
	if len(views) != 2 || views[0].Priority != 3 || views[1].Priority != 2 {
		t.Fatalf("jobs show: %+v; want priorities 3 and 2", views)
	}
	if _, err := runIn(t, "", "enqueue", "--group", "mail", "--kind", "welcome", "--priority", "5", "--database-url", url); !errors.Is(err, admin.ErrBadInput) {
		t.Fatalf("--priority 5: %v; want ErrBadInput", err)
	}
	if _, err := runIn(t, `{"kind": "welcome", "priority": 9}`+"\n", "enqueue", "--stdin", "--group", "mail", "--database-url", url); !errors.Is(err, queue.ErrInvalidJob) {
		t.Fatalf("a line with priority 9: %v; want ErrInvalidJob", err)
	}
}

// pause --kind warns on stderr when no worker of the group recorded a
// handler for the kind (a typo pauses nothing that runs), and pauses it
// all the same; status --json gives the pause's time to the microsecond.
func TestPauseUnknownKindWarns(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pgtest.Must(t, ignoreOut(runIn(t, "", "groups", "create", "mail", "--partitions", "4", "--database-url", url)))
	pool := pgtest.PoolURL(t, url)
	ctx := pgtest.Context(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.group_kinds (group_name, kind) VALUES ('mail', 'welcome')`)
	pgtest.Must(t, err)
	const warning = "warning: no worker of group mail has recorded a handler for kind"
	out, err := run(t, "pause", "mail", "--kind", "welcome", "--database-url", url)
	if err != nil || !strings.Contains(out, "paused kind welcome") || strings.Contains(out, "warning") {
		t.Fatalf("pause of a known kind: %v\n%s", err, out)
	}
	out, err = run(t, "pause", "mail", "--kind", "welcom", "--database-url", url)
	if err != nil || !strings.Contains(out, "paused kind welcom") || !strings.Contains(out, warning+` "welcom"`) {
		t.Fatalf("pause of an unknown kind: %v\n%s", err, out)
	}
	var st admin.Status
	pgtest.Must(t, runJSON(t, &st, "", "status", "--database-url", url))
	if ps := st.Groups[0].Paused; len(ps) != 2 || ps[0].Kind != "welcom" || ps[1].Kind != "welcome" {
		t.Fatalf("status --json: %+v; want both kinds paused", ps)
	}
	var at time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT paused_at FROM leasehold.pauses WHERE kind = 'welcome'`).Scan(&at))
	if p := st.Groups[0].Paused[1]; !p.At.Equal(at) {
		t.Errorf("status --json paused_at %v; stored %v", p.At, at)
	}
}
