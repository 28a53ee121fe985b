package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// kindsFor records that a worker of "emails" handles kinds, as a
// Processor does when it starts.
func kindsFor(t *testing.T, pool *pgxpool.Pool, kinds ...string) {
	t.Helper()
	_, err := pool.Exec(pgtest.Context(t), `INSERT INTO leasehold.group_kinds (group_name, kind) SELECT 'emails', unnest($1::text[])`, kinds)
	pgtest.Must(t, err)
}

func itemCount(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.jobs WHERE batch_item IS NOT NULL`).Scan(&n))
	return n
}

// Bad input gets a typed error naming what is wrong, and nothing of the
// call (or of the chunk) is applied.
func TestBatchBadInputIsRefusedWhole(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice", "batch_done")
	done := &queue.FollowUp{Args: batchDone{Batch: "b", Which: "complete"}}

	// Creating.
	if _, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails"}); !errors.Is(err, queue.ErrInvalidBatch) {
		t.Fatalf("no name: %v; want ErrInvalidBatch", err)
	}
	if _, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "nope", Name: "b"}); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("unknown group: %v; want ErrUnknownGroup", err)
	}
	var ke *queue.KindError
	_, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b", OnSuccess: &queue.FollowUp{Args: orphan{}}})
	if !errors.As(err, &ke) || !errors.Is(err, queue.ErrNoHandler) || len(ke.Kinds) != 1 || ke.Kinds[0] != "nobody_handles_this" {
		t.Fatalf("follow-up without a handler: %v; want a *KindError naming it", err)
	}
	if _, err := c.Batch(ctx, "emails", "b"); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Fatalf("a refused create left a batch: %v", err)
	}
	b1, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b", Description: "d", OnComplete: done})
	pgtest.Must(t, err)
	b2, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b", Description: "d", OnComplete: done})
	if err != nil || b2.ID != b1.ID {
		t.Fatalf("creating the same batch again: %+v, %v; want batch %d", b2, err, b1.ID)
	}
	if _, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b", Description: "other", OnComplete: done}); !errors.Is(err, queue.ErrBatchExists) {
		t.Fatalf("another description: %v; want ErrBatchExists", err)
	}
	if _, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b", Description: "d"}); !errors.Is(err, queue.ErrBatchExists) || !strings.Contains(err.Error(), "OnComplete") {
		t.Fatalf("without its follow-up: %v; want ErrBatchExists naming OnComplete", err)
	}

	// Adding.
	ok := func(id string, user int) queue.Item { return queue.Item{ID: id, Args: reprice{User: user}} }
	if _, err := c.AddItems(ctx, "emails", "nope", ok("a", 1)); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Fatalf("unknown batch: %v; want ErrUnknownBatch", err)
	}
	var ie *queue.ItemError
	_, err = c.AddItems(ctx, "emails", "b", ok("a", 1), queue.Item{ID: "bad", Args: unencodable{}})
	if !errors.As(err, &ie) || !errors.Is(err, queue.ErrInvalidItem) || ie.Index != 1 || ie.Item != "bad" {
		t.Fatalf("unencodable args: %v; want an *ItemError for item 1", err)
	}
	_, err = c.AddItems(ctx, "emails", "b", ok("a", 1), queue.Item{Args: reprice{}})
	if !errors.As(err, &ie) || !errors.Is(err, queue.ErrInvalidItem) || ie.Index != 1 {
		t.Fatalf("no item key: %v; want an *ItemError for item 1", err)
	}
	_, err = c.AddItems(ctx, "emails", "b", ok("a", 1), queue.Item{ID: "o", Args: orphan{}})
	if !errors.As(err, &ke) || ke.Kinds[0] != "nobody_handles_this" {
		t.Fatalf("an item kind without a handler: %v; want a *KindError", err)
	}
	_, err = c.AddItems(ctx, "emails", "b", ok("a", 1), ok("x", 2), ok("a", 3))
	if !errors.As(err, &ie) || !errors.Is(err, queue.ErrItemConflict) || ie.Index != 2 || !strings.Contains(err.Error(), "item 0") {
		t.Fatalf("an item key twice in one call, other args: %v; want ErrItemConflict for item 2 naming item 0", err)
	}
	if n := itemCount(t, pool); n != 0 {
		t.Fatalf("refused calls stored %d items", n)
	}
	a, err := c.AddItems(ctx, "emails", "b", ok("a", 1), ok("x", 2), ok("a", 1))
	if err != nil || a != (queue.Added{Items: 3, Added: 2, Duplicates: 1}) {
		t.Fatalf("same item twice in one call: %+v, %v", a, err)
	}
	_, err = c.AddItems(ctx, "emails", "b", ok("y", 9), ok("x", 5))
	if !errors.As(err, &ie) || !errors.Is(err, queue.ErrItemConflict) || ie.Index != 1 || ie.Item != "x" ||
		!strings.Contains(err.Error(), `{"user": 2}`) {
		t.Fatalf("a stored item key with other args: %v; want ErrItemConflict for item 1 saying what is stored", err)
	}
	_, err = c.AddItems(ctx, "emails", "b", queue.Item{ID: "x", Key: "k", Args: reprice{User: 2}})
	if !errors.Is(err, queue.ErrItemConflict) || !strings.Contains(err.Error(), "key") {
		t.Fatalf("a stored item key with another key: %v; want ErrItemConflict", err)
	}
	if n := itemCount(t, pool); n != 2 {
		t.Fatalf("%d items stored; want 2 (the refused chunks added none)", n)
	}
	b, err := c.Batch(ctx, "emails", "b")
	if err != nil || b.Total != 2 || b.Pending != 2 || b.Sealed() {
		t.Fatalf("batch: %+v, %v; want 2 pending, unsealed", b, err)
	}

	// Sealed and cancelled.
	_, err = c.SealBatch(ctx, "emails", "b")
	pgtest.Must(t, err)
	if _, err := c.AddItems(ctx, "emails", "b", ok("z", 1)); !errors.Is(err, queue.ErrBatchSealed) {
		t.Fatalf("adding to a sealed batch: %v; want ErrBatchSealed", err)
	}
	if a, err := c.AddItems(ctx, "emails", "b", ok("a", 1)); !errors.Is(err, queue.ErrBatchSealed) {
		t.Fatalf("adding a present item to a sealed batch: %+v, %v; want ErrBatchSealed", a, err)
	}
	_, err = c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "c"})
	pgtest.Must(t, err)
	_, err = c.CancelBatch(ctx, "emails", "c")
	pgtest.Must(t, err)
	if _, err := c.AddItems(ctx, "emails", "c", ok("z", 1)); !errors.Is(err, queue.ErrBatchCancelled) {
		t.Fatalf("adding to a cancelled batch: %v; want ErrBatchCancelled", err)
	}
	if _, err := c.RetryBatch(ctx, "emails", "c"); !errors.Is(err, queue.ErrBatchCancelled) {
		t.Fatalf("retrying a cancelled batch: %v; want ErrBatchCancelled", err)
	}
	for _, op := range []func() error{
		func() error { _, err := c.SealBatch(ctx, "emails", "nope"); return err },
		func() error { _, err := c.CancelBatch(ctx, "emails", "nope"); return err },
		func() error { _, err := c.RetryBatch(ctx, "emails", "nope"); return err },
	} {
		if err := op(); !errors.Is(err, queue.ErrUnknownBatch) {
			t.Fatalf("an operation on an unknown batch: %v; want ErrUnknownBatch", err)
		}
	}
}

// A database that went away (here: a closed pool) gives every batch call,
// and every call added with pauses and running jobs, an error wrapping
// leasehold.ErrClosed, not a bare driver error.
func TestBatchCallsOnAClosedPoolReportErrClosed(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	kindsFor(t, pool, "reprice")
	_, err := c.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b"})
	pgtest.Must(t, err)
	closed, err := pgxpool.New(ctx, pool.Config().ConnString())
	pgtest.Must(t, err)
	closed.Close()
	dc, err := queue.New(pgtest.DBOn(t, closed), queue.Config{})
	pgtest.Must(t, err)
	item := queue.Item{ID: "a", Args: reprice{User: 1}}
	for name, call := range map[string]func() error{
		"CreateBatch": func() error { _, err := dc.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "b"}); return err },
		"AddItems":    func() error { _, err := dc.AddItems(ctx, "emails", "b", item); return err },
		"SubmitItems": func() error { _, err := dc.SubmitItems(ctx, "emails", "b", items(3, nil)); return err },
		"SealBatch":   func() error { _, err := dc.SealBatch(ctx, "emails", "b"); return err },
		"CancelBatch": func() error { _, err := dc.CancelBatch(ctx, "emails", "b"); return err },
		"RetryBatch":  func() error { _, err := dc.RetryBatch(ctx, "emails", "b"); return err },
		"Batch":       func() error { _, err := dc.Batch(ctx, "emails", "b"); return err },
		"Batches":     func() error { _, err := dc.Batches(ctx, queue.BatchFilter{}); return err },
		// Issue 15's calls.
		"Pause":   func() error { return dc.Pause(ctx, "emails", "", "") },
		"Resume":  func() error { return dc.Resume(ctx, "emails", "") },
		"Paused":  func() error { _, err := dc.Paused(ctx, "emails"); return err },
		"Running": func() error { _, err := dc.Running(ctx, "emails"); return err },
		"Cancel":  func() error { _, err := dc.Cancel(ctx, 1); return err },
		"JobInfo": func() error { _, err := dc.JobInfo(ctx, 1); return err },
		"List": func() error {
			_, err := dc.List(ctx, queue.Filter{Group: "emails", State: queue.StateRunning})
			return err
		},
	} {
		if err := call(); !errors.Is(err, leasehold.ErrClosed) {
			t.Errorf("%s on a closed pool: %v; want an error wrapping leasehold.ErrClosed", name, err)
		}
	}
}
