package ui_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// In Chromium, a live region follows its content both ways without a
// reload: the group's #waits shows a key waiting behind a job, loses it
// when that job is cancelled (the region becomes its empty note: before,
// the region was left out of the fresh page and live.js kept the stale
// rows), and shows a new wait that appears after the page was loaded;
// the outbox section appears once the group has an outbox. live.js also
// removes a live element the fresh page lacks.
func TestBrowserLiveRegionEmpties(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	h, err := ui.New(e.db, ui.Config{Refresh: 250 * time.Millisecond})
	pgtest.Must(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	later := time.Now().Add(time.Hour)
	blocker := e.enqueue(queue.Job{Key: "K", Args: note{Text: "a"}, RunAt: later})
	e.enqueue(queue.Job{Key: "K", Args: note{Text: "b"}})

	tb := newTab(t, browser)
	tb.open(srv.URL + "/groups/emails")
	if n := tb.count("#waits tbody tr a"); n != 1 {
		t.Fatalf("#waits: %d rows before the cancel; want 1", n)
	}
	eval[bool](tb, `window.__sameDocument = true`)

	_, err = e.q.Cancel(ctx, blocker)
	pgtest.Must(t, err)
	tb.wait("#waits to lose its row and show its empty note",
		`document.querySelectorAll("#waits tbody tr a").length === 0 && document.querySelectorAll("#waits td.empty").length === 1`)

	blocker2 := e.enqueue(queue.Job{Key: "L", Args: note{Text: "c"}, RunAt: later})
	e.enqueue(queue.Job{Key: "L", Args: note{Text: "d"}})
	tb.wait("#waits to show the new wait", `(r => r.length === 1 && r[0].getAttribute("href").endsWith("/jobs/`+itoa(blocker2)+`"))(document.querySelectorAll("#waits tbody tr a"))`)

	// The outbox section appears once the group has an outbox, though the
	// page was loaded without one.
	if n := tb.count("#outbox section"); n != 0 {
		t.Fatalf("#outbox: %d sections before the group had an outbox; want none", n)
	}
	e.seedOutbox(2, 1, 3, 1, 1)
	tb.wait("#outbox to show partition 2's segments", `(r => r.length === 1 && r[0].getAttribute("data-outbox-partition") === "2")(document.querySelectorAll("#outbox tr[data-outbox-partition]"))`)

	// An element marked live that the fresh page lacks is removed.
	eval[bool](tb, `(() => { const p = document.createElement("p"); p.id = "gone"; p.dataset.live = ""; document.body.append(p); return true })()`)
	tb.wait("#gone to be removed", `document.getElementById("gone") === null`)
	if !eval[bool](tb, `window.__sameDocument === true`) {
		t.Error("the page reloaded instead of updating itself")
	}
}
