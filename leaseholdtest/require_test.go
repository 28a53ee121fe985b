package leaseholdtest_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/queue"
)

type Greeting struct {
	Name string `json:"name"`
}

func (Greeting) Kind() string { return "greeting" }

type Farewell struct {
	Name string `json:"name"`
}

func (Farewell) Kind() string { return "farewell" }

// enqueue enqueues jobs into db (creating their groups, of 3 partitions)
// and returns their ids.
func enqueue(t testing.TB, db *leasehold.DB, jobs ...queue.Job) []int64 {
	t.Helper()
	ctx := context2m(t.(*testing.T))
	c, err := queue.New(db, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, j := range jobs {
		if _, err := c.EnsureGroup(ctx, j.Group, 3); err != nil {
			t.Fatal(err)
		}
		e, err := c.Enqueue(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

func TestRequireEnqueued(t *testing.T) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))

	mustFail(t, func(tb testing.TB) { leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, nil) },
		`no job of kind "greeting"`, "no pending job of any kind")

	soon := time.Now().Add(time.Hour)
	ids := enqueue(t, db,
		queue.Job{Group: "hello", Key: "k", Args: Greeting{"Ada"}, UniqueKey: "u-ada", MaxAttempts: 3},
		queue.Job{Group: "hello", Args: Greeting{"Grace"}, RunAt: soon},
		queue.Job{Group: "other", Args: Farewell{"Ada"}},
	)

	j := leaseholdtest.RequireEnqueued[Greeting](ctx, t, db, &leaseholdtest.RequireOpts{Args: Greeting{"Ada"}})
	if j.ID != ids[0] || j.Args.Name != "Ada" || j.Group != "hello" || j.Key != "k" {
		t.Fatalf("found %+v; want job %d, Ada's", j, ids[0])
	}
	// Every option that matches the job, together.
	j = leaseholdtest.RequireEnqueued[Greeting](ctx, t, db, &leaseholdtest.RequireOpts{Group: "hello", Key: "k", UniqueKey: "u-ada",
		MaxAttempts: 3, State: queue.StatePending, RunBefore: time.Now().Add(time.Minute)})
	if j.ID != ids[0] {
		t.Fatalf("found job %d; want %d", j.ID, ids[0])
	}
	j = leaseholdtest.RequireEnqueued[Greeting](ctx, t, db, &leaseholdtest.RequireOpts{RunAfter: soon.Add(-time.Minute), RunBefore: soon.Add(time.Minute)})
	if j.ID != ids[1] {
		t.Fatalf("found job %d by its run-at window; want %d", j.ID, ids[1])
	}

	// Each option that does not match fails, and says how each job of the
	// kind differs.
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{Args: Greeting{"Zed"}})
	}, `no job of kind "greeting" enqueued (state pending, args {"name":"Zed"})`, "2 job(s) of the kind differ",
		`args {"name":"Ada"}, not {"name":"Zed"}`, `args {"name":"Grace"}, not {"name":"Zed"}`)
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{Group: "other", Args: Greeting{"Ada"}})
	}, `group "hello", not "other"`)
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{Key: "x", Args: Greeting{"Ada"}})
	}, `key "k", not "x"`)
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{UniqueKey: "u-x"})
	}, `unique key "u-ada", not "u-x"`)
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{MaxAttempts: 7, Args: Greeting{"Ada"}})
	}, "max attempts 3, not 7")
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{State: queue.StateCompleted})
	}, "state pending, not completed")
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{RunAfter: soon.Add(time.Minute)})
	}, "before")
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{RunBefore: soon.Add(-time.Minute), Args: Greeting{"Grace"}})
	}, "after")
	// Two jobs match: not exactly one.
	mustFail(t, func(tb testing.TB) { leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, nil) },
		`2 jobs of kind "greeting" enqueued`, "want exactly one")
	// A kind without jobs names the pending jobs of other kinds.
	mustFail(t, func(tb testing.TB) { leaseholdtest.RequireEnqueued[ping](ctx, tb, db, nil) },
		`no job of kind "ping"`, `"farewell" (1)`, `"greeting" (2)`)

	// RequireNotEnqueued: passes for what is not there, fails for what is.
	mustPass(t, func(tb testing.TB) {
		leaseholdtest.RequireNotEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{Args: Greeting{"Zed"}})
	})
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireNotEnqueued[Farewell](ctx, tb, db, &leaseholdtest.RequireOpts{Group: "other"})
	}, `1 job(s) of kind "farewell"`, "want none", `args {"name":"Ada"}`)
}

type ping struct{}

func (ping) Kind() string { return "ping" }

func TestRequireManyEnqueued(t *testing.T) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	ids := enqueue(t, db,
		queue.Job{Group: "g", Args: Greeting{"Ada"}},
		queue.Job{Group: "g", Args: Farewell{"Ada"}},
		queue.Job{Group: "g", Args: Greeting{"Grace"}},
		queue.Job{Group: "g", Args: ping{}}, // of a kind not asked for: ignored
	)
	js := leaseholdtest.RequireManyEnqueued(ctx, t, db, []leaseholdtest.Expected{
		{Kind: "greeting", Opts: &leaseholdtest.RequireOpts{Args: Greeting{"Ada"}}},
		{Kind: "farewell"},
		{Kind: "greeting", Opts: &leaseholdtest.RequireOpts{Group: "g"}},
	})
	if len(js) != 3 || js[0].ID != ids[0] || js[1].ID != ids[1] || js[2].ID != ids[2] {
		t.Fatalf("found %v; want jobs %v", js, ids[:3])
	}
	mustFail(t, func(tb testing.TB) { // the wrong order
		leaseholdtest.RequireManyEnqueued(ctx, tb, db, []leaseholdtest.Expected{{Kind: "farewell"}, {Kind: "greeting"}, {Kind: "greeting"}})
	}, `expected job 0: kind "farewell", found job`, `of kind "greeting"`)
	mustFail(t, func(tb testing.TB) { // one missing
		leaseholdtest.RequireManyEnqueued(ctx, tb, db, []leaseholdtest.Expected{{Kind: "greeting"}, {Kind: "farewell"}, {Kind: "greeting"}, {Kind: "greeting"}})
	}, "3 found, 4 expected", `expected job 3: kind "greeting"`, "missing")
	mustFail(t, func(tb testing.TB) { // one too many
		leaseholdtest.RequireManyEnqueued(ctx, tb, db, []leaseholdtest.Expected{{Kind: "greeting"}, {Kind: "farewell"}})
	}, "3 found, 2 expected", "not expected")
	mustFail(t, func(tb testing.TB) { // args differ
		leaseholdtest.RequireManyEnqueued(ctx, tb, db, []leaseholdtest.Expected{
			{Kind: "greeting", Opts: &leaseholdtest.RequireOpts{Args: Greeting{"Grace"}}}, {Kind: "farewell"}, {Kind: "greeting"}})
	}, `args {"name":"Ada"}, not {"name":"Grace"}`)
	mustFail(t, func(tb testing.TB) { leaseholdtest.RequireManyEnqueued(ctx, tb, db, nil) }, "no job expected")
}

// The Tx variants see what a transaction enqueued before it commits; the
// pool does not.
func TestRequireEnqueuedTx(t *testing.T) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	c, err := queue.New(db, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureGroup(ctx, "g", 2); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := c.EnqueueTx(ctx, tx, queue.Job{Group: "g", Args: Greeting{"Ada"}}, queue.Job{Group: "g", Args: Farewell{"Ada"}}); err != nil {
		t.Fatal(err)
	}
	leaseholdtest.RequireEnqueuedTx[Greeting](ctx, t, db, tx, &leaseholdtest.RequireOpts{Args: Greeting{"Ada"}})
	leaseholdtest.RequireManyEnqueuedTx(ctx, t, db, tx, []leaseholdtest.Expected{{Kind: "greeting"}, {Kind: "farewell"}})
	leaseholdtest.RequireNotEnqueued[Greeting](ctx, t, db, nil) // not committed
	mustFail(t, func(tb testing.TB) { leaseholdtest.RequireNotEnqueuedTx[Greeting](ctx, tb, db, tx, nil) }, `kind "greeting"`)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	mustFail(t, func(tb testing.TB) { leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, nil) }, `no job of kind "greeting"`)
}

// The assertions read a bounded number of jobs of a kind: beyond it they
// fail, saying so, rather than judge on the oldest jobs only (where
// RequireNotEnqueued would pass and RequireEnqueued fail wrongly).
func TestRequireTooManyJobs(t *testing.T) {
	ctx := context2m(t)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	defer leaseholdtest.SetMaxJobs(2)()
	enqueue(t, db, queue.Job{Group: "g", Args: Greeting{"Ada"}}, queue.Job{Group: "g", Args: Greeting{"Grace"}})
	// At the limit: read in full.
	leaseholdtest.RequireEnqueued[Greeting](ctx, t, db, &leaseholdtest.RequireOpts{Args: Greeting{"Grace"}})

	enqueue(t, db, queue.Job{Group: "g", Args: Greeting{"Zed"}})
	const want = `more than 2 jobs of kind "greeting"`
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireNotEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{Args: Greeting{"Zed"}})
	}, want)
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireEnqueued[Greeting](ctx, tb, db, &leaseholdtest.RequireOpts{Args: Greeting{"Zed"}})
	}, want)
	mustFail(t, func(tb testing.TB) {
		leaseholdtest.RequireManyEnqueued(ctx, tb, db, []leaseholdtest.Expected{{Kind: "greeting"}, {Kind: "greeting"}, {Kind: "greeting"}})
	}, want)
}
