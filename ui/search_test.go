package ui_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// A jobs page searches in slices until Config.ScanTime has passed: on an
// idle database it searches Scan jobs and finds an old match; when each
// slice seems to take a second, it stops after the first slice and says
// how many it searched.
func TestJobsSearchTime(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{Scan: 5000, ScanTime: time.Hour})
	rare := e.enqueue(queue.Job{Args: kinded{K: "rare", Text: "old"}})
	jobs := make([]queue.Job, 2500)
	for i := range jobs {
		jobs[i] = queue.Job{Group: "emails", Args: note{Text: "x"}}
	}
	_, err := e.q.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	r := e.page("/jobs?group=emails&kind=rare")
	if rows := withAttr(byID(r.Doc, "jobs"), "data-job", itoa(rare)); len(rows) != 1 {
		t.Errorf("a search of up to 5000 jobs in an hour did not find job %d under 2500 others: %q", rare, text(byID(r.Doc, "jobs")))
	}

	slow, err := ui.New(e.db, ui.Config{Scan: 5000, ScanTime: time.Second})
	pgtest.Must(t, err)
	var mu sync.Mutex
	clock := time.Unix(1e9, 0)
	ui.SetClock(slow, func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock })
	e.h = slow
	r = e.page("/jobs?group=emails&kind=rare")
	if rows := withAttr(byID(r.Doc, "jobs"), "data-job", itoa(rare)); len(rows) != 0 {
		t.Errorf("a search out of time after its first slice found job %d, 2500 jobs down", rare)
	}
	if got := text(byID(r.Doc, "scan-note")); !strings.Contains(got, "Searched 1000 jobs") {
		t.Errorf("#scan-note = %q; want the 1000 jobs searched", got)
	}
}
