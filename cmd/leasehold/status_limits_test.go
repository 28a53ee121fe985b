package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// block, rated and wide are the args of the jobs of TestStatusLimits:
// block's handler waits for the test; rated's keys start once an hour;
// wide declares a KeyConcurrency of 3 and is never enqueued.
type (
	block struct{ N int }
	rated struct{}
	wide  struct{}
)

func (block) Kind() string { return "block" }
func (rated) Kind() string { return "rated" }
func (wide) Kind() string  { return "wide" }

// limitsRows returns the rows of the "held back by limits" section of
// status output out: the fields of each line after its header, up to the
// blank line or a note.
func limitsRows(t *testing.T, out string) [][]string {
	t.Helper()
	sec := strings.Index(out, "held back by limits: ")
	if sec < 0 {
		t.Fatalf("no limits section:\n%s", out)
	}
	lines := strings.Split(out[sec:], "\n")
	if f := strings.Fields(lines[1]); !slices.Equal(f, []string{"KEY", "KIND", "LIMIT", "WAITING", "PARTITION", "OWNER"}) {
		t.Fatalf("limits header %q:\n%s", f, out)
	}
	var rows [][]string
	for _, l := range lines[2:] {
		if l == "" || strings.HasPrefix(l, "(") {
			break
		}
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// The keys a worker holds back by limits show in `leasehold status` (text
// and JSON) and `leasehold jobs limited`, with their waiting counts, the
// partition and its owner, busiest first, and the jobs held back per
// limit: a key behind its KeyConcurrency (1: one job runs, three wait) and
// a key behind its KeyRate (1 per hour: one ran, one waits). A key whose
// one job runs is not listed, nor is a row no live grant stands behind.
// The limits the kinds declare show too, as the worker recorded them.
func TestStatusLimits(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	db := pgtest.DBOn(t, pool)
	release := make(chan struct{})
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[block]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ctx.Err()
	}, queue.WithPolicy(queue.Policy{KeyConcurrency: 1})) // declared: a key's jobs waiting their turn count as held back
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[rated]) error { return nil },
		queue.WithPolicy(queue.Policy{KeyRate: queue.Rate{Starts: 1, Per: time.Hour}}))
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[wide]) error { return nil },
		queue.WithPolicy(queue.Policy{KeyConcurrency: 3}))
	w, err := worker.New(db, worker.Config{Group: "g", Partitions: 4, ID: "w1", Workers: ws,
		Lease: lease.Config{TTL: 10 * time.Second},
		Queue: queue.ProcessorConfig{PollInterval: 20 * time.Millisecond, PublishInterval: 20 * time.Millisecond}})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(ctx))
	t.Cleanup(func() {
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	client, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	enqueue := func(key string, args queue.Args) {
		t.Helper()
		_, err := client.Enqueue(ctx, queue.Job{Group: "g", Key: key, Args: args})
		pgtest.Must(t, err)
	}
	for n := range 4 {
		enqueue("hot", block{n})
	}
	enqueue("cold", block{9})
	enqueue("rk", rated{})
	enqueue("rk", rated{})
	// A row of a partition the group does not have: no lease stands behind
	// it, so its keys are not trusted.
	_, err = pool.Exec(ctx, `
		INSERT INTO leasehold.running (group_name, partition, token, worker, jobs, limited, updated_at)
		VALUES ('g', 99, 1, 'ghost', '[]', '[{"key": "ghost", "kind": "block", "limit": "key_rate", "waiting": 50}]', now())`)
	pgtest.Must(t, err)

	hot, rk := partition.OfString("hot", 4), partition.OfString("rk", 4)
	want := []admin.LimitedKeyStatus{
		{Key: "hot", Kind: "block", Limit: queue.LimitKeyConcurrency, Waiting: 3, Partition: hot, Owner: "w1"},
		{Key: "rk", Kind: "rated", Limit: queue.LimitKeyRate, Waiting: 1, Partition: rk, Owner: "w1"},
	}
	var rep admin.Status
	var got []admin.LimitedKeyStatus
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
		got = nil
		if l := rep.Groups[0].Limits; l != nil {
			for _, k := range l.Keys {
				k.Token = 0
				got = append(got, k)
			}
		}
		if reflect.DeepEqual(got, want) {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("status limits keys %+v; want %+v (not cold, whose one job runs, nor ghost)", got, want)
		}
	}
	l := rep.Groups[0].Limits
	wantTotals := []admin.LimitTotal{{Limit: queue.LimitKeyConcurrency, Waiting: 3, Keys: 1},
		{Limit: queue.LimitKeyRate, Waiting: 1, Keys: 1}, {Limit: queue.LimitGroupConcurrency}}
	if !reflect.DeepEqual(l.Totals, wantTotals) || l.Partial {
		t.Errorf("totals %+v, partial %v; want %+v, not partial", l.Totals, l.Partial, wantTotals)
	}
	wantDeclared := []admin.KindLimits{
		{Kind: "rated", DeclaredLimits: queue.DeclaredLimits{KeyConcurrency: 1, KeyRateStarts: 1, KeyRatePerMS: 3600000}},
		{Kind: "wide", DeclaredLimits: queue.DeclaredLimits{KeyConcurrency: 3}},
	}
	if !reflect.DeepEqual(l.Declared, wantDeclared) {
		t.Errorf("declared %+v; want %+v (block declares the default)", l.Declared, wantDeclared)
	}

	out, err := runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	if !strings.Contains(out, "held back by limits: 4 jobs (key_concurrency 3, key_rate 1, group_concurrency 0)\n") {
		t.Errorf("no totals line:\n%s", out)
	}
	wantRows := [][]string{{`"hot"`, "block", "key_concurrency", "3", fmt.Sprint(hot), "w1"},
		{`"rk"`, "rated", "key_rate", "1", fmt.Sprint(rk), "w1"}}
	if rows := limitsRows(t, out); !reflect.DeepEqual(rows, wantRows) {
		t.Errorf("limits rows %q; want %q:\n%s", rows, wantRows, out)
	}
	for _, line := range []string{"limits declared", "rated  1                1 per 1h0m0s  -", "wide   3                -             -"} {
		if !strings.Contains(out, line) {
			t.Errorf("status: no %q:\n%s", line, out)
		}
	}

	var jl admin.LimitsStatus
	pgtest.Must(t, runJSON(t, &jl, "", "jobs", "limited", "--database-url", url, "--group", "g"))
	if len(jl.Keys) != 2 || jl.Keys[0].Key != "hot" || !reflect.DeepEqual(jl.Totals, wantTotals) {
		t.Errorf("jobs limited --json: %+v", jl)
	}
	out, err = runIn(t, "", "jobs", "limited", "--database-url", url, "--group", "g", "--limit", "1")
	pgtest.Must(t, err)
	if rows := limitsRows(t, out); !reflect.DeepEqual(rows, wantRows[:1]) ||
		!strings.Contains(out, "(the 1 keys with the most jobs waiting, of 2; a larger --limit lists more)") ||
		strings.Contains(out, "limits declared") {
		t.Errorf("jobs limited --limit 1: rows %q; want %q, and the note:\n%s", rows, wantRows[:1], out)
	}
	if _, err := runIn(t, "", "jobs", "limited", "--database-url", url); err == nil || !strings.Contains(err.Error(), "--group is required") {
		t.Errorf("jobs limited without --group: %v", err)
	}
	out, err = runIn(t, "", "jobs", "limited", "--database-url", url, "--group", "other")
	if err != nil || out != "no job is held back by a limit\n" {
		t.Errorf("jobs limited of an unknown group: %v, %q", err, out)
	}
}
