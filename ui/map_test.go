package ui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

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
	if got, _ := alerts(e); len(got) != 0 {
		t.Fatalf("every partition held, nothing due: alerts %v; want none", got)
	}

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
