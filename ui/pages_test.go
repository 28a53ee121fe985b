package ui_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// pageReady reports whether queue.Client.Page is implemented on this
// branch (the data helper's change): the jobs list's assertions need it.
func pageReady(t *testing.T, e *env) bool {
	_, err := e.q.Page(pgtest.Context(t), queue.Filter{Group: "emails"})
	return err == nil || !strings.Contains(err.Error(), "not implemented")
}

// Every page renders the seeded state of a live fleet of two workers: the
// group and both members, every partition with its owner and token, a
// discarded job's error timeline and finishing token, a job waiting behind
// another, a finished batch's progress.
func TestPagesShowALiveFleet(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{AllowActions: true})
	e.startWorkers(2)
	g := e.waitHeld()

	done := e.enqueue(queue.Job{Key: "a", Args: note{Text: "fine"}})
	failed := e.enqueue(queue.Job{Key: "b", Args: note{Text: "boom", Fail: true}, MaxAttempts: 1})
	later := e.enqueue(queue.Job{Key: "w", Args: note{Text: "later"}, RunAt: time.Now().Add(time.Hour)})
	behind := e.enqueue(queue.Job{Key: "w", Args: note{Text: "behind"}})
	e.waitState(done, queue.StateCompleted)
	e.waitState(failed, queue.StateDiscarded)

	_, err := e.q.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "nightly", Description: "three notes"})
	pgtest.Must(t, err)
	_, err = e.q.AddItems(ctx, "emails", "nightly", queue.Item{ID: "1", Args: note{Text: "1"}},
		queue.Item{ID: "2", Args: note{Text: "2"}}, queue.Item{ID: "3", Args: note{Text: "3"}})
	pgtest.Must(t, err)
	b, err := e.q.SealBatch(ctx, "emails", "nightly")
	pgtest.Must(t, err)
	eventually(t, func() error {
		b, err = e.q.BatchByID(ctx, b.ID)
		if err != nil || b.State() != queue.BatchSucceeded {
			return fmt.Errorf("batch %d is %s (%v); want succeeded", b.ID, b.State(), err)
		}
		return nil
	})

	t.Run("overview", func(t *testing.T) {
		r := e.page("/")
		rows := withAttr(byID(r.Doc, "groups"), "data-group", "emails")
		if len(rows) != 1 || !strings.Contains(text(rows[0]), "4/4") {
			t.Fatalf("table#groups: want one row for emails with 4/4 partitions held; got %d: %q", len(rows), text(byID(r.Doc, "groups")))
		}
		members := byID(r.Doc, "members")
		for _, id := range []string{"worker-a", "worker-b"} {
			if len(withAttr(members, "data-member", id)) != 1 {
				t.Errorf("table#members has no row for %s: %q", id, text(members))
			}
		}
		if byID(r.Doc, "throughput") == nil {
			t.Error("no #throughput")
		}
	})
	t.Run("group", func(t *testing.T) {
		r := e.page("/groups/emails")
		rows := all(byID(r.Doc, "partitions"), func(n *nodeT) bool { return hasAttr(n, "data-partition") })
		if len(rows) != 4 {
			t.Fatalf("table#partitions has %d partition rows; want 4", len(rows))
		}
		for i, row := range rows {
			p := g.Partitions[i]
			owner := text(cell(row, "owner"))
			if owner != "worker-a" && owner != "worker-b" {
				t.Errorf("partition %d: td.owner = %q; want a worker", i, owner)
			}
			if tok, err := strconv.ParseInt(text(cell(row, "token")), 10, 64); err != nil || tok < p.Token {
				t.Errorf("partition %d: td.token = %q; want a token ≥ %d", i, text(cell(row, "token")), p.Token)
			}
			for _, c := range []string{"expires", "running", "backlog", "lag"} {
				if cell(row, c) == nil {
					t.Errorf("partition %d: no td.%s", i, c)
				}
			}
		}
		if byID(r.Doc, "events") == nil || byID(r.Doc, "pauses") == nil || byID(r.Doc, "pause-form") == nil {
			t.Error("no #events, #pauses or form#pause-form")
		}
	})
	t.Run("discarded job", func(t *testing.T) {
		j, err := e.q.JobInfo(ctx, failed)
		pgtest.Must(t, err)
		r := e.page("/jobs/" + itoa(failed))
		if s := text(byID(r.Doc, "job-state")); s != "discarded" {
			t.Errorf("#job-state = %q; want discarded", s)
		}
		errs := all(byID(r.Doc, "job-errors"), func(n *nodeT) bool { return n.Data == "li" })
		if len(errs) != 1 || !strings.Contains(text(errs[0]), "failed on purpose: boom") || !strings.Contains(text(errs[0]), "attempt 1") {
			t.Errorf("ol#job-errors: want one li with attempt 1 and the error; got %q", text(byID(r.Doc, "job-errors")))
		}
		if j.FinishedToken == nil || text(byID(r.Doc, "job-token")) != fmt.Sprint(*j.FinishedToken) {
			t.Errorf("#job-token = %q; want %v", text(byID(r.Doc, "job-token")), j.FinishedToken)
		}
		if !strings.Contains(text(byID(r.Doc, "job-args")), `"text": "boom"`) {
			t.Errorf("pre#job-args = %q; want the args pretty-printed", text(byID(r.Doc, "job-args")))
		}
		if byID(r.Doc, "retry-form") == nil || byID(r.Doc, "cancel-form") != nil {
			t.Error("a discarded job: want form#retry-form and no form#cancel-form")
		}
	})
	t.Run("waiting job", func(t *testing.T) {
		r := e.page("/jobs/" + itoa(behind))
		w := byID(r.Doc, "waiting-behind")
		links := all(w, func(n *nodeT) bool { return n.Data == "a" })
		if w == nil || len(links) != 1 || attr(links[0], "href") != "/jobs/"+itoa(later) {
			t.Fatalf("#waiting-behind: want a link to /jobs/%d; got %q", later, text(w))
		}
		if s := text(byID(r.Doc, "job-state")); s != "pending" {
			t.Errorf("#job-state = %q; want pending", s)
		}
		if byID(r.Doc, "cancel-form") == nil || byID(r.Doc, "retry-form") != nil {
			t.Error("a pending job: want form#cancel-form and no form#retry-form")
		}
		if r := e.page("/jobs/" + itoa(later)); byID(r.Doc, "waiting-behind") != nil {
			t.Error("the job waited behind shows #waiting-behind itself")
		}
	})
	t.Run("batches", func(t *testing.T) {
		r := e.page("/batches?group=emails")
		rows := withAttr(byID(r.Doc, "batches"), "data-batch", itoa(b.ID))
		if len(rows) != 1 {
			t.Fatalf("table#batches has no row for batch %d", b.ID)
		}
		bars := all(rows[0], func(n *nodeT) bool { return n.Data == "progress" })
		if len(bars) != 1 || attr(bars[0], "value") != "3" || attr(bars[0], "max") != "3" {
			t.Errorf("the batch's progress: want value=3 max=3; got %q", text(rows[0]))
		}
		r = e.page("/batches/" + itoa(b.ID))
		if s := text(byID(r.Doc, "batch-state")); s != "succeeded" {
			t.Errorf("#batch-state = %q; want succeeded", s)
		}
		if p := byID(r.Doc, "batch-progress"); p == nil || attr(p, "value") != "3" {
			t.Error("no progress#batch-progress at 3")
		}
		if l := byID(r.Doc, "batch-jobs"); l == nil || attr(l, "href") != "/jobs?batch="+itoa(b.ID)+"&group=emails" {
			t.Errorf("link to the batch's jobs: %v", attr(l, "href"))
		}
		if byID(r.Doc, "cancel-batch-form") != nil {
			t.Error("a succeeded batch offers form#cancel-batch-form")
		}
	})
	t.Run("jobs", func(t *testing.T) {
		if !pageReady(t, e) {
			t.Skip("queue.Client.Page is not implemented on this branch yet")
		}
		r := e.page("/jobs?group=emails")
		for _, id := range []int64{done, failed, later, behind} {
			if len(withAttr(byID(r.Doc, "jobs"), "data-job", itoa(id))) != 1 {
				t.Errorf("table#jobs has no row for job %d", id)
			}
		}
		r = e.page("/jobs?group=emails&state=discarded")
		rows := all(byID(r.Doc, "jobs"), func(n *nodeT) bool { return hasAttr(n, "data-job") })
		if len(rows) != 1 || attr(rows[0], "data-job") != itoa(failed) {
			t.Errorf("state=discarded: want job %d alone; got %q", failed, text(byID(r.Doc, "jobs")))
		}
		r = e.page("/jobs?group=emails&key=w")
		rows = all(byID(r.Doc, "jobs"), func(n *nodeT) bool { return hasAttr(n, "data-job") })
		if len(rows) != 2 {
			t.Errorf("key=w: want 2 jobs; got %q", text(byID(r.Doc, "jobs")))
		}
	})
}

// cell returns the td of class c in row.
func cell(row *nodeT, c string) *nodeT {
	cs := all(row, func(n *nodeT) bool { return n.Data == "td" && hasClass(n, c) })
	if len(cs) == 0 {
		return nil
	}
	return cs[0]
}

// The jobs list pages with before= and a#next, and each page's jobs are
// older than the last one's: no job twice, none left out.
func TestJobsPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	if !pageReady(t, e) {
		t.Skip("queue.Client.Page is not implemented on this branch yet")
	}
	want := map[string]bool{}
	for i := range 120 {
		want[itoa(e.enqueue(queue.Job{Key: "k" + strconv.Itoa(i), Args: note{Text: "x"}}))] = true
	}
	seen := map[string]bool{}
	path := "/jobs?group=emails"
	for pages := 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages of 120 jobs")
		}
		r := e.page(path)
		for _, row := range all(byID(r.Doc, "jobs"), func(n *nodeT) bool { return hasAttr(n, "data-job") }) {
			id := attr(row, "data-job")
			if seen[id] {
				t.Fatalf("job %s on two pages", id)
			}
			seen[id] = true
		}
		path = ""
		if next := byID(r.Doc, "next"); next != nil {
			path = attr(next, "href")
			if !strings.Contains(path, "before=") {
				t.Fatalf("a#next = %q; want before=", path)
			}
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("paged through %d jobs; want %d", len(seen), len(want))
	}
}

// Bad input gets a 400 or 404 page saying what is wrong, never a 500.
func TestBadInputPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	for _, c := range []struct {
		path   string
		status int
		says   string
	}{
		{"/jobs/abc", http.StatusBadRequest, `job id "abc" is not a positive integer`},
		{"/jobs/0", http.StatusBadRequest, "not a positive integer"},
		{"/jobs/99999999", http.StatusNotFound, "job not found"},
		{"/groups/nope", http.StatusNotFound, "group not found"},
		{"/jobs?group=nope", http.StatusNotFound, `group "nope" does not exist`},
		{"/jobs?group=emails&state=bogus", http.StatusBadRequest, `state "bogus" is not one of`},
		{"/jobs?group=emails&partition=x", http.StatusBadRequest, `partition "x" is not a partition number`},
		{"/jobs?group=emails&batch=-3", http.StatusBadRequest, `batch "-3" is not an id`},
		{"/jobs?group=emails&before=zz", http.StatusBadRequest, `before "zz" is not an id`},
		{"/batches/x", http.StatusBadRequest, `batch id "x" is not a positive integer`},
		{"/batches/99999999", http.StatusNotFound, "unknown batch"},
		{"/batches?group=nope", http.StatusNotFound, `group "nope" does not exist`},
		{"/nowhere", http.StatusNotFound, "no page at /nowhere"},
	} {
		r := e.get(c.path)
		msg := text(byID(r.Doc, "error-message"))
		if r.StatusCode != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("GET %s = %d %q; want %d saying %q", c.path, r.StatusCode, msg, c.status, c.says)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q; want an HTML page", c.path, ct)
		}
	}
	if pageReady(t, e) {
		r := e.get("/jobs?group=emails&partition=99")
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("partition out of range: %d; want 400", r.StatusCode)
		}
	}
	// The log has each failed request with its path and status.
	if !strings.Contains(e.log.String(), `"path":"/groups/nope","status":404`) {
		t.Errorf("the log does not record the failed request:\n%s", e.log.String())
	}
}

// With its database closed, every page answers 503 with the error, not a
// 500 or a panic.
func TestDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}})
	e.pool.Close()
	for _, p := range []string{"/", "/groups/emails", "/jobs?group=emails", "/jobs/" + itoa(id), "/batches", "/batches/1"} {
		r := e.get(p)
		if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(text(byID(r.Doc, "error-message")), "closed") {
			t.Errorf("GET %s with the database closed = %d %q; want 503 saying closed", p, r.StatusCode, text(byID(r.Doc, "error-message")))
		}
	}
}

// New validates its Config.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	db := pgtest.DB(t)
	for _, p := range []string{"queue", "/queue/", "/", "/a/../b", "//x", "/a b", "/a?b"} {
		if _, err := ui.New(db, ui.Config{Path: p}); !errors.Is(err, ui.ErrInvalidConfig) {
			t.Errorf("Path %q: err = %v; want ErrInvalidConfig", p, err)
		}
	}
	for _, p := range []string{"", "/queue", "/admin/queue"} {
		if _, err := ui.New(db, ui.Config{Path: p}); err != nil {
			t.Errorf("Path %q: %v", p, err)
		}
	}
	if _, err := ui.New(nil, ui.Config{}); !errors.Is(err, ui.ErrInvalidConfig) {
		t.Errorf("nil DB: err = %v; want ErrInvalidConfig", err)
	}
	if _, err := ui.New(db, ui.Config{LagAlert: -time.Second}); !errors.Is(err, ui.ErrInvalidConfig) {
		t.Errorf("negative LagAlert: err = %v; want ErrInvalidConfig", err)
	}
}
