package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

func TestEnqueueFlags(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	ctx := context.Background()
	var res []admin.EnqueueResult
	err := runJSON(t, &res, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "welcome",
		"--key", "user-42", "--args", `{"user_id": 42}`, "--delay", "1h", "--max-attempts", "3", "--unique-key", "w:42")
	pgtest.Must(t, err)
	if len(res) != 1 || res[0].ID == 0 || res[0].Duplicate || res[0].Group != "g" ||
		res[0].Partition != partition.OfString("user-42", 8) || res[0].Line != 0 {
		t.Fatalf("enqueue result %+v", res)
	}
	q, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	j, err := q.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	var now time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now))
	if j.Kind != "welcome" || j.Key != "user-42" || string(j.Args) != `{"user_id": 42}` || j.MaxAttempts != 3 ||
		j.UniqueKey != "w:42" || j.State != "pending" {
		t.Errorf("job stored as %+v", j)
	}
	if due := j.RunAt.Sub(now); due < 59*time.Minute || due > time.Hour {
		t.Errorf("--delay 1h: due in %v (database clock)", due)
	}

	// The same unique key again: a duplicate, nothing enqueued.
	pgtest.Must(t, runJSON(t, &res, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "welcome",
		"--unique-key", "w:42"))
	if len(res) != 1 || !res[0].Duplicate || res[0].ID != 0 || jobCount(t, pool) != 1 {
		t.Fatalf("duplicate enqueue: %+v, %d jobs", res, jobCount(t, pool))
	}
	// An absolute run-at time, and the human table.
	out, err := runIn(t, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "k", "--run-at", "2030-01-02T03:04:05Z")
	pgtest.Must(t, err)
	var at time.Time
	var part int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT run_at, partition FROM leasehold.jobs WHERE kind = 'k'`).Scan(&at, &part))
	if !strings.Contains(out, "PARTITION") || !strings.Contains(out, fmt.Sprintf("g      %d ", part)) {
		t.Errorf("table output %q; want the keyless job's partition %d", out, part)
	}
	if !at.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("--run-at stored as %v", at)
	}
}

// --ordering and a line's "ordering" are stored; strict is the default.
func TestEnqueueOrdering(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	ctx := context.Background()
	q, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	ordering := func(res []admin.EnqueueResult) ([]queue.Ordering, []int64) {
		t.Helper()
		out, behind := make([]queue.Ordering, len(res)), make([]int64, len(res))
		for i, r := range res {
			j, err := q.JobInfo(ctx, r.ID)
			pgtest.Must(t, err)
			out[i], behind[i] = j.Ordering, j.WaitingBehind
		}
		return out, behind
	}
	// Key a: a non-blocking job scheduled for later holds nothing up; the
	// third job waits behind the second, due.
	var res, more []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "k", "--key", "a",
		"--ordering", "non-blocking", "--delay", "1h"))
	pgtest.Must(t, runJSON(t, &more, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "k", "--key", "a"))
	res = append(res, more...)
	pgtest.Must(t, runJSON(t, &more, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "k", "--key", "a",
		"--ordering", "strict"))
	res = append(res, more...)
	in := `{"kind":"k","key":"b","ordering":"non-blocking"}
{"kind":"k","key":"b","ordering":"strict"}
{"kind":"k","key":"b","ordering":""}
{"kind":"k","key":"b"}`
	pgtest.Must(t, runJSON(t, &more, in, "enqueue", "--database-url", url, "--group", "g", "-"))
	res = append(res, more...)
	want := []queue.Ordering{queue.OrderNonBlocking, queue.OrderStrict, queue.OrderStrict,
		queue.OrderNonBlocking, queue.OrderStrict, queue.OrderStrict, queue.OrderStrict}
	got, behind := ordering(res)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("orderings stored %v; want %v", got, want)
	}
	if w := []int64{0, 0, res[1].ID}; !slices.Equal(behind[:3], w) {
		t.Errorf("key a's jobs wait behind %v; want %v", behind[:3], w)
	}
	var views []admin.JobView
	pgtest.Must(t, runJSON(t, &views, "", "jobs", "show", "--database-url", url, fmt.Sprint(res[0].ID), fmt.Sprint(res[1].ID)))
	if len(views) != 2 || views[0].Ordering != "non-blocking" || views[1].Ordering != "strict" || views[1].WaitingBehind != 0 {
		t.Errorf("jobs show of key a's first two jobs: %+v", views)
	}
}

func TestEnqueueFlagsBad(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	base := []string{"enqueue", "--database-url", url}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "k"}, "--group and --kind are required"},
		{[]string{"--group", "g"}, "--group and --kind are required"},
		{[]string{"--group", "g", "--kind", "k", "--args", `{"a":`}, "not JSON"},
		{[]string{"--group", "g", "--kind", "k", "--run-at", "tomorrow"}, "RFC 3339"},
		{[]string{"--group", "g", "--kind", "k", "--run-at", "2030-01-02T03:04:05Z", "--delay", "1m"}, "exclude each other"},
		{[]string{"--group", "g", "--kind", "k", "--delay", "-1m"}, "negative"},
		{[]string{"--group", "g", "--kind", strings.Repeat("x", 101)}, "kind"},
		{[]string{"--group", "nope", "--kind", "k"}, "unknown group"},
		{[]string{"--group", "g", "--kind", "k", "extra"}, "unexpected argument"},
		{[]string{"--stdin", "--kind", "k"}, "--kind with --stdin"},
		{[]string{"--group", "g", "--kind", "k", "--key", "a", "--ordering", "fifo"}, `--ordering "fifo" is not strict or non-blocking`},
		{[]string{"--group", "g", "--kind", "k", "--ordering", "Strict"}, `--ordering "Strict" is not strict or non-blocking`},
		{[]string{"--stdin", "--ordering", "strict"}, "--ordering with --stdin"},
	} {
		_, err := runIn(t, "", append(base, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("enqueue %v: %v; want an error about %q", tc.args, err, tc.want)
		}
	}
	if n := jobCount(t, pool); n != 0 {
		t.Fatalf("%d jobs enqueued by bad commands", n)
	}
}

func TestEnqueueStdin(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	_, err := pool.Exec(context.Background(), `INSERT INTO leasehold.groups (name, partitions) VALUES ('other', 2)`)
	pgtest.Must(t, err)
	in := `{"kind":"a","key":"k1","args":{"n":1}}

{"group":"other","kind":"b","key":"k2","args":[1,2],"max_attempts":2,"delay":"30s"}
   {"kind":"a","key":"k1","args":"text","unique_key":"u","run_at":"2030-01-01T00:00:00Z"}` + "\r\n" +
		`{"kind":"a","key":"k3","unique_key":"u"}` + "\n"
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, in, "enqueue", "--database-url", url, "--group", "g", "-"))
	want := []admin.EnqueueResult{
		{Line: 1, Group: "g", Partition: partition.OfString("k1", 8)},
		{Line: 3, Group: "other", Partition: partition.OfString("k2", 2)},
		{Line: 4, Group: "g", Partition: partition.OfString("k1", 8)},
		{Line: 5, Group: "g", Partition: partition.OfString("k3", 8), Duplicate: true},
	}
	if len(res) != len(want) {
		t.Fatalf("results %+v; want %+v", res, want)
	}
	for i := range want {
		if i < 3 && (res[i].ID == 0 || (i > 0 && res[i].ID <= res[i-1].ID)) {
			t.Errorf("result %d: id %d; want increasing ids in input order", i, res[i].ID)
		}
		want[i].ID = res[i].ID
		if res[i] != want[i] {
			t.Errorf("result %d: %+v; want %+v", i, res[i], want[i])
		}
	}
	var args, kinds string
	pgtest.Must(t, pool.QueryRow(context.Background(),
		`SELECT string_agg(args::text, ' ' ORDER BY id), string_agg(kind, ' ' ORDER BY id) FROM leasehold.jobs`).Scan(&args, &kinds))
	if args != `{"n": 1} [1, 2] "text"` || kinds != "a b a" {
		t.Errorf("stored args %s, kinds %s", args, kinds)
	}
}

// A malformed line fails the command, names the line, and nothing of the
// input is enqueued: also when the queue refuses a job in a later batch of
// the transaction (the earlier batches roll back).
func TestEnqueueStdinMalformed(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	good := `{"group":"g","kind":"a","key":"k"}` + "\n"
	many := strings.Repeat(good, 2*admin.EnqueueBatch+5)
	for _, tc := range []struct {
		in   string
		line int
		want string
	}{
		{good + good + `{"group":"g","kind":"a",` + "\n", 3, "invalid JSON"},
		{good + `{"group":"g","key":"k"}` + "\n", 2, "no kind"},
		{`{"group":"g","kind":"a","runat":"2030-01-01T00:00:00Z"}`, 1, "unknown field"},
		{good + `{"group":"g","kind":"a","args":{"a":}}`, 2, "invalid JSON"},
		{good + `["g","a"]`, 2, "not a JSON object"},
		{good + `{"kind":"a"} {"kind":"b"}`, 2, "more than one value"},
		{good + `{"kind":"a"}`, 2, "no group"},
		{good + good + `{"group":"nope","kind":"a"}`, 3, "unknown group"},
		{`{"group":"g","kind":"a","delay":"5 minutes"}`, 1, "delay"},
		{`{"group":"g","kind":"a","delay":"5m","run_at":"2030-01-01T00:00:00Z"}`, 1, "both"},
		{`{"group":"g","kind":"a","run_at":"tomorrow"}`, 1, "invalid JSON"},
		{`{"group":"g","kind":"a","max_attempts":-1}`, 1, "max attempts"},
		{`{"group":"g","kind":"a","max_attempts":"3"}`, 1, "invalid JSON"},
		{good + good + `{"group":"g","kind":"a","key":"k","ordering":"fifo"}`, 3, `ordering "fifo" is not strict or non-blocking`},
		{`{"group":"g","kind":"a","key":"k","ordering":1}`, 1, "invalid JSON"},
		{many + `{"group":"g","kind":"` + strings.Repeat("x", 101) + `"}`, 2*admin.EnqueueBatch + 6, "kind"},
		{many + `{"group":"g","kind":"a","key":"` + strings.Repeat("x", 256) + `"}`, 2*admin.EnqueueBatch + 6, "key"},
	} {
		out, err := runIn(t, tc.in, "enqueue", "--database-url", url, "--stdin")
		prefix := fmt.Sprintf("line %d: ", tc.line)
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "nothing was enqueued") || !errors.Is(err, admin.ErrBadInput) && !errors.Is(err, queue.ErrUnknownGroup) {
			t.Errorf("input ending %q: %v; want an error starting %q about %q", tail(tc.in), err, prefix, tc.want)
		}
		if out != "" {
			t.Errorf("output %q after an error", out)
		}
		if n := jobCount(t, pool); n != 0 {
			t.Fatalf("input ending %q: %d jobs enqueued; want none", tail(tc.in), n)
		}
	}
	// The control: the same many lines, well-formed, enqueue every job.
	var res []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &res, many, "enqueue", "--database-url", url, "--stdin"))
	if n := jobCount(t, pool); n != 2*admin.EnqueueBatch+5 || len(res) != n {
		t.Fatalf("%d jobs enqueued, %d results; want %d", n, len(res), 2*admin.EnqueueBatch+5)
	}
}

func tail(s string) string {
	if len(s) > 60 {
		return "…" + s[len(s)-60:]
	}
	return s
}
