package ui_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// due is the overview's count of due jobs of group "emails".
func (e *env) due() string {
	e.t.Helper()
	rows := withAttr(byID(e.page("/").Doc, "groups"), "data-group", "emails")
	if len(rows) != 1 {
		e.t.Fatalf("table#groups has %d rows for emails; want 1", len(rows))
	}
	return text(cell(rows[0], "due"))
}

// The backlog is counted once per BacklogAge, whatever the pages read
// meanwhile: a count cached for an hour does not see new jobs, while a
// handler that counts on every page (the control) does.
func TestBacklogIsCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{BacklogAge: time.Hour})
	h := e.h
	var reads atomic.Int64
	ui.CountBacklogReads(h.(*ui.Handler), &reads)
	if got := e.due(); got != "0" {
		t.Fatalf("due = %q; want 0", got)
	}
	for range 3 {
		e.enqueue(queue.Job{Args: note{Text: "x"}})
	}
	if got := e.due(); got != "0" {
		t.Errorf("due = %q an hour before the count is due again; want the cached 0", got)
	}
	// The ownership map needs the waiting keys, which the overview did
	// not read: one more read, then both pages take it from the cache.
	e.page("/groups/emails")
	e.page("/groups/emails")
	e.due()
	if n := reads.Load(); n != 2 {
		t.Errorf("%d backlog reads; want 2 (the overview's, then the map's with the waiting keys)", n)
	}
	if r := e.page("/"); byID(r.Doc, "backlog-at") == nil {
		t.Error("the overview does not say when the backlog was counted: no #backlog-at")
	}

	uncached, err := ui.New(e.db, ui.Config{BacklogAge: -1})
	pgtest.Must(t, err)
	e.h = uncached
	if got := e.due(); got != "3" {
		t.Errorf("control, counting on every page: due = %q; want 3", got)
	}
}

// A count older than BacklogAge is still served at once, and replaced in
// the background: a later page shows the new count.
func TestBacklogIsRefreshed(t *testing.T) {
	t.Parallel()
	const age = 100 * time.Millisecond
	e := newEnv(t, ui.Config{BacklogAge: age})
	if got := e.due(); got != "0" {
		t.Fatalf("due = %q; want 0", got)
	}
	for range 2 {
		e.enqueue(queue.Job{Args: note{Text: "x"}})
	}
	time.Sleep(age)
	if got := e.due(); got != "0" {
		t.Errorf("due = %q; want the stale 0, served while it is counted again", got)
	}
	eventually(t, func() error {
		if got := e.due(); got != "2" {
			return fmt.Errorf("due = %q; want 2", got)
		}
		return nil
	})
}

// Pages that find no count wait for one read, which they share.
func TestBacklogReadIsShared(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{BacklogAge: time.Hour})
	var reads atomic.Int64
	ui.CountBacklogReads(e.h.(*ui.Handler), &reads)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { e.get("/groups/emails") })
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("20 maps of a group not counted yet read its backlog %d times; want 1", n)
	}
}
