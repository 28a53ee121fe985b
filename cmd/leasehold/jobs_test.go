package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// enqueueN enqueues n jobs of kind a (keys k0, k1, ...) into group g and
// returns their ids.
func enqueueN(t *testing.T, url string, n int) []int64 {
	t.Helper()
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, `{"group":"g","kind":"a","key":"k%d","args":{"i":%d}}`+"\n", i, i)
	}
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, in.String(), "enqueue", "--database-url", url, "-"))
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func TestJobsCancelRetryShow(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	ctx := context.Background()
	ids := enqueueN(t, url, 3)
	_, err := pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed', finished_at = now(), finished_token = 9 WHERE id = $1`, ids[2])
	pgtest.Must(t, err)
	s := func(id int64) string { return fmt.Sprint(id) }

	var ch []admin.ChangeResult
	err = runJSON(t, &ch, "", "jobs", "cancel", "--database-url", url, s(ids[0]), s(ids[2]), "999999")
	if !errors.Is(err, admin.ErrNotChanged) || !strings.Contains(err.Error(), "2 of 3 not cancelled") {
		t.Errorf("cancel with jobs left alone: %v; want admin.ErrNotChanged, 2 of 3", err)
	}
	want := []admin.ChangeResult{{ID: ids[0], Changed: true, State: "cancelled"},
		{ID: ids[2], State: "completed", Reason: "already completed"},
		{ID: 999999, Reason: "not found (never enqueued, or deleted by retention)"}}
	if fmt.Sprint(ch) != fmt.Sprint(want) {
		t.Errorf("cancel: %+v; want %+v", ch, want)
	}

	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "show", "--database-url", url, s(ids[0]), s(ids[2])))
	if len(views) != 2 || views[0].State != "cancelled" || views[0].FinishedToken != nil || views[0].Key != "k0" ||
		compact(t, views[0].Args) != `{"i":0}` || views[1].FinishedToken == nil || *views[1].FinishedToken != 9 {
		t.Fatalf("show: %+v", views)
	}
	if errs := views[0].Errors; len(errs) != 1 || errs[0].Error != "cancelled by an operator" {
		t.Errorf("cancelled job's errors %+v", views[0].Errors)
	}
	out, err := runIn(t, "", "jobs", "show", "--database-url", url, s(ids[0]))
	pgtest.Must(t, err)
	for _, want := range []string{"state", "cancelled", "cancelled by an operator", `{"i": 0}`, "by an operator"} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}
	_, err = runIn(t, "", "jobs", "show", "--database-url", url, s(ids[1]), "999999")
	if !errors.Is(err, queue.ErrNotFound) || !strings.Contains(err.Error(), "999999") {
		t.Errorf("show of an unknown id: %v; want ErrNotFound naming it", err)
	}

	err = runJSON(t, &ch, "", "jobs", "retry", "--database-url", url, s(ids[0]), s(ids[1]))
	if !errors.Is(err, admin.ErrNotChanged) {
		t.Errorf("retry of a pending job: %v; want admin.ErrNotChanged", err)
	}
	want = []admin.ChangeResult{{ID: ids[0], Changed: true, State: "pending"},
		{ID: ids[1], State: "pending", Reason: "pending: nothing to retry"}}
	if fmt.Sprint(ch) != fmt.Sprint(want) {
		t.Errorf("retry: %+v; want %+v", ch, want)
	}
	out, err = runIn(t, "", "jobs", "cancel", "--database-url", url, s(ids[0]))
	if err != nil || !strings.Contains(out, "cancelled") {
		t.Errorf("cancel (table): %v\n%s", err, out)
	}
	out, err = runIn(t, "", "jobs", "retry", "--database-url", url, s(ids[0]))
	if err != nil || !strings.Contains(out, "retried") || strings.Contains(out, "not retried") {
		t.Errorf("retry (table): %v\n%s", err, out)
	}
	if _, err := runIn(t, "", "jobs", "retry", "--database-url", url, "12x"); err == nil || !strings.Contains(err.Error(), `"12x"`) {
		t.Errorf("retry of a bad id: %v", err)
	}
}

func TestJobsList(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	ids := enqueueN(t, url, 5)
	_, err := pool.Exec(context.Background(), `UPDATE leasehold.jobs SET state = 'discarded', finished_at = now() WHERE id = ANY($1)`,
		[]int64{ids[1], ids[3]})
	pgtest.Must(t, err)
	list := func(args ...string) []int64 {
		t.Helper()
		var views []admin.JobView
		pgtest.Must(t, runJSON(t, &views, "", append([]string{"jobs", "list", "--database-url", url, "--group", "g"}, args...)...))
		out := make([]int64, len(views))
		for i, v := range views {
			out[i] = v.ID
		}
		return out
	}
	same := func(got []int64, want ...int64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("listed %v; want %v", got, want)
		}
	}
	same(list(), ids[4], ids[3], ids[2], ids[1], ids[0])
	same(list("--state", "discarded"), ids[3], ids[1])
	same(list("--limit", "2"), ids[4], ids[3])
	same(list("--limit", "2", "--before", fmt.Sprint(ids[3])), ids[2], ids[1])
	same(list("--kind", "b"))
	same(list("--key", "k2"), ids[2])
	same(list("--key", "k3", "--state", "pending"))

	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "list", "--database-url", url, "--group", "g", "--partition", "0,1,2,3,4,5,6,7"))
	if len(views) != 5 {
		t.Errorf("every partition: %d jobs", len(views))
	}
	out, err := runIn(t, "", "jobs", "list", "--database-url", url, "--group", "g", "--limit", "2")
	if err != nil || !strings.Contains(out, "--before "+fmt.Sprint(ids[3])) || !strings.Contains(out, "discarded") {
		t.Errorf("list (table): %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--state", "runnin"}, {"--limit", "100000"}, {"--group", "nope"}, {"--group", ""}} {
		if _, err := runIn(t, "", append([]string{"jobs", "list", "--database-url", url, "--group", "g"}, args...)...); err == nil {
			t.Errorf("list %v: no error", args)
		}
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	var b bytes.Buffer
	pgtest.Must(t, json.Compact(&b, raw))
	return b.String()
}

// A job behind a strict job scheduled for later shows the job it waits
// behind; behind a non-blocking one it waits for none.
func TestJobsShowWaitingBehind(t *testing.T) {
	t.Parallel()
	url, _ := adminDB(t)
	in := `{"group":"g","kind":"a","key":"s","delay":"1h"}
{"group":"g","kind":"a","key":"s"}
{"group":"g","kind":"a","key":"n","delay":"1h","ordering":"non-blocking"}
{"group":"g","kind":"a","key":"n"}
{"group":"g","kind":"a"}`
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, in, "enqueue", "--database-url", url, "-"))
	if len(res) != 5 {
		t.Fatalf("enqueued %+v", res)
	}
	args := []string{"jobs", "show", "--database-url", url}
	for _, r := range res {
		args = append(args, fmt.Sprint(r.ID))
	}
	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", args...))
	type got struct {
		Ordering string
		Behind   int64
	}
	want := []got{{"strict", 0}, {"strict", res[0].ID}, {"non-blocking", 0}, {"strict", 0}, {"strict", 0}}
	for i, v := range views {
		if g := (got{v.Ordering, v.WaitingBehind}); i >= len(want) || v.ID != res[i].ID || g != want[i] {
			t.Errorf("job %d (line %d): ordering %q, waiting behind %d; want %+v", v.ID, i+1, v.Ordering, v.WaitingBehind, want[min(i, len(want)-1)])
		}
	}
	// The raw JSON: waiting_behind only where the job waits.
	out, err := runIn(t, "", append(args[:4:4], fmt.Sprint(res[1].ID), fmt.Sprint(res[3].ID), "--json")...)
	pgtest.Must(t, err)
	if n := strings.Count(out, `"waiting_behind"`); n != 1 || !strings.Contains(out, fmt.Sprintf(`"waiting_behind": %d`, res[0].ID)) {
		t.Errorf("waiting_behind appears %d times; want once, %d:\n%s", n, res[0].ID, out)
	}

	show := func(id int64) map[string]string {
		t.Helper()
		out, err := runIn(t, "", "jobs", "show", "--database-url", url, fmt.Sprint(id))
		pgtest.Must(t, err)
		rows := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if name, value, ok := strings.Cut(l, "  "); ok {
				rows[name] = strings.TrimSpace(value)
			}
		}
		return rows
	}
	rows := show(res[1].ID)
	if w := fmt.Sprintf(`job %d (key "s")`, res[0].ID); rows["waits behind"] != w || rows["ordering"] != "strict" {
		t.Errorf("human output of the waiting job: %q; want waits behind %q, ordering strict", rows, w)
	}
	rows = show(res[3].ID)
	if _, ok := rows["waits behind"]; ok || rows["ordering"] != "strict" {
		t.Errorf("human output of the job behind a non-blocking one: %q; want no waits behind", rows)
	}
	if rows = show(res[2].ID); rows["ordering"] != "non-blocking" || rows["errors"] != "none" {
		t.Errorf("human output of the non-blocking job: %q", rows)
	}
	if rows = show(res[4].ID); rows["ordering"] != "strict (ignored: no key)" {
		t.Errorf("human output of the keyless job: %q", rows)
	}
}

// The attempt limit a job was enqueued without is marked as the default,
// which a kind's policy may override; an explicit one is not.
func TestJobsMarkTheDefaultAttemptLimit(t *testing.T) {
	t.Parallel()
	url, _ := adminDB(t)
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, `{"group":"g","kind":"a","args":{}}`+"\n"+`{"group":"g","kind":"a","args":{},"max_attempts":5}`+"\n",
		"enqueue", "--database-url", url, "-"))
	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "show", "--database-url", url, fmt.Sprint(res[0].ID), fmt.Sprint(res[1].ID)))
	if len(views) != 2 || !views[0].DefaultMaxAttempts || views[1].DefaultMaxAttempts || views[1].MaxAttempts != 5 {
		t.Fatalf("show --json: %+v; want the first job's limit default, the second's 5 and not", views)
	}
	const note = "(default; a kind's policy may override)"
	out, err := runIn(t, "", "jobs", "show", "--database-url", url, fmt.Sprint(res[0].ID))
	if err != nil || !strings.Contains(out, "0 of 25 "+note) {
		t.Errorf("show of a default limit: %v\n%s", err, out)
	}
	out, err = runIn(t, "", "jobs", "show", "--database-url", url, fmt.Sprint(res[1].ID))
	if err != nil || !strings.Contains(out, "0 of 5") || strings.Contains(out, note) {
		t.Errorf("show of an explicit limit: %v\n%s", err, out)
	}
	out, err = runIn(t, "", "jobs", "list", "--database-url", url, "--group", "g")
	if err != nil || !strings.Contains(out, "0/25*") || !strings.Contains(out, "0/5 ") || !strings.Contains(out, "(*: the default attempt limit") {
		t.Errorf("list: %v\n%s", err, out)
	}
}
