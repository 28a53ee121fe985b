package ui_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// A running batch shows a rate and an ETA from its first view on, labelled
// as its average since creation, and keeps them while the reads of its
// pages have not measured a current rate (reads that saw no item finish,
// however many): not "–".
func TestBatchRateFallsBackToAverage(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	e.startWorkers(1)
	e.waitHeld()
	_, err := e.q.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "slow"})
	pgtest.Must(t, err)
	_, err = e.q.AddItems(ctx, "emails", "slow", queue.Item{ID: "1", Args: note{Text: "1"}},
		queue.Item{ID: "2", Args: note{Text: "2"}}, queue.Item{ID: "3", Args: note{Text: "3", Block: true}})
	pgtest.Must(t, err)
	b, err := e.q.SealBatch(ctx, "emails", "slow")
	pgtest.Must(t, err)
	// Two items finish; the third runs until the worker stops.
	eventually(t, func() error {
		b, err = e.q.BatchByID(ctx, b.ID)
		if err != nil || b.Pending != 1 || b.Completed != 2 {
			return fmt.Errorf("batch: %d pending, %d completed (%v); want 1 and 2", b.Pending, b.Completed, err)
		}
		return nil
	})
	check := func(what, rate, eta string) {
		t.Helper()
		if !strings.HasSuffix(rate, "/s avg") {
			t.Errorf("%s: rate %q; want the average, labelled (\"N/s avg\")", what, rate)
		}
		if eta == "–" || eta == "" || eta == "done" || !strings.HasSuffix(eta, "(avg)") {
			t.Errorf("%s: ETA %q; want one from the average rate", what, eta)
		}
	}
	// Each read is later on the database clock than the one before, and
	// none sees an item finish: a meter alone would measure 0 ("–"), from
	// the second read on, and still after a full window of reads (10).
	for i := range 12 {
		r := e.page("/batches/" + itoa(b.ID))
		check(fmt.Sprintf("detail, read %d", i+1), text(byID(r.Doc, "batch-rate")), text(byID(r.Doc, "batch-eta")))
	}
	r := e.page("/batches?group=emails")
	rows := withAttr(byID(r.Doc, "batches"), "data-batch", itoa(b.ID))
	if len(rows) != 1 {
		t.Fatalf("table#batches has no row for batch %d: %q", b.ID, text(byID(r.Doc, "batches")))
	}
	check("list", text(cell(rows[0], "rate")), text(cell(rows[0], "eta")))
}
