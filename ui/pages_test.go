package ui_test

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// Every page renders the seeded state of a live fleet of two workers: the
// group and both members, every partition with its owner and token, a
// discarded job's error timeline and finishing token, a job waiting behind
// another, a finished batch's progress.
func TestPagesShowALiveFleet(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{AllowActions: true})
	e.startWorkers(2)
	e.waitHeld()

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
		// The runs above: 1 + 3 completed, 1 discarded, as the workers
		// record them (every PublishInterval).
		eventually(t, func() error {
			r := e.page("/")
			fig := withAttr(byID(r.Doc, "throughput"), "data-group", "emails")
			if len(fig) != 1 || !strings.Contains(text(fig[0]), "4 completed, 1 failed") {
				return fmt.Errorf("#throughput: want emails with 4 completed, 1 failed; got %q", text(byID(r.Doc, "throughput")))
			}
			if n := len(all(fig[0], func(n *nodeT) bool { return n.Data == "rect" && hasClass(n, "bad") && attr(n, "height") != "0" })); n != 1 {
				return fmt.Errorf("#throughput: %d minutes with a failed bar; want 1", n)
			}
			return checkBarsAligned(fig[0])
		})
	})
	t.Run("group", func(t *testing.T) {
		// Each partition's owner, token and lease as ReadStatus has them,
		// read once the leases stand still (the same before and after
		// the page).
		var r response
		eventually(t, func() error {
			before := readStatus(t, e)
			r = e.page("/groups/emails")
			after := readStatus(t, e)
			for i, p := range after.Partitions {
				if b := before.Partitions[i]; b.Owner != p.Owner || b.Token != p.Token || b.Held != p.Held {
					return fmt.Errorf("partition %d moved while the page was read", i)
				}
			}
			return checkMap(r, after)
		})
		for _, row := range all(byID(r.Doc, "partitions"), func(n *nodeT) bool { return hasAttr(n, "data-partition") }) {
			if owner := text(cell(row, "owner")); owner != "worker-a" && owner != "worker-b" {
				t.Errorf("partition %s: td.owner = %q; want a worker", attr(row, "data-partition"), owner)
			}
			for _, c := range []string{"expires", "running", "backlog", "lag"} {
				if cell(row, c) == nil {
					t.Errorf("partition %s: no td.%s", attr(row, "data-partition"), c)
				}
			}
		}
		if byID(r.Doc, "events") == nil || byID(r.Doc, "pauses") == nil || byID(r.Doc, "pause-form") == nil {
			t.Error("no #events, #pauses or form#pause-form")
		}
		// Each partition was handed to its first owner at least once.
		handoffs := withAttr(byID(r.Doc, "events"), "data-event-kind", "handoff")
		parts := map[string]bool{}
		for _, li := range handoffs {
			parts[attr(li, "data-partition")] = true
		}
		if len(parts) != 4 {
			t.Errorf("#events: handoffs of partitions %v; want all 4: %q", parts, text(byID(r.Doc, "events")))
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
	t.Run("running job", func(t *testing.T) {
		id := e.enqueue(queue.Job{Key: "r", Args: note{Text: "long", Block: true}})
		eventually(t, func() error {
			r := e.page("/jobs/" + itoa(id))
			if s := text(byID(r.Doc, "job-state")); s != "running" || !strings.HasPrefix(text(byID(r.Doc, "job-worker")), "worker-") {
				return fmt.Errorf("#job-state = %q on %q; want running on a worker", s, text(byID(r.Doc, "job-worker")))
			}
			r = e.page("/jobs?group=emails&state=running")
			if rows := withAttr(byID(r.Doc, "jobs"), "data-job", itoa(id)); len(rows) != 1 {
				return fmt.Errorf("state=running does not list job %d: %q", id, text(byID(r.Doc, "jobs")))
			}
			return nil
		})
		// The unfiltered list says so too, as the job's page does (the
		// job is pending in storage; the list reads the running set).
		eventually(t, func() error {
			r := e.page("/jobs?group=emails")
			rows := withAttr(byID(r.Doc, "jobs"), "data-job", itoa(id))
			if len(rows) != 1 {
				return fmt.Errorf("table#jobs does not list job %d: %q", id, text(byID(r.Doc, "jobs")))
			}
			if s := text(cell(rows[0], "state")); s != "running" || !strings.Contains(text(rows[0]), "running on worker-") {
				return fmt.Errorf("job %d's row: state %q in %q; want running, running on a worker", id, s, text(rows[0]))
			}
			// The others are not marked: job done stays completed.
			if s := text(cell(withAttr(byID(r.Doc, "jobs"), "data-job", itoa(done))[0], "state")); s != "completed" {
				return fmt.Errorf("job %d's row: state %q; want completed", done, s)
			}
			return nil
		})
		// Running is pending in storage: it can be cancelled.
		if r := e.page("/jobs/" + itoa(id)); byID(r.Doc, "cancel-form") == nil {
			t.Error("a running job offers no form#cancel-form")
		}
	})
}

// readStatus reads group "emails" with admin.ReadStatus.
func readStatus(t *testing.T, e *env) admin.GroupStatus {
	t.Helper()
	st, err := admin.ReadStatus(pgtest.Context(t), e.db, []string{"emails"})
	pgtest.Must(t, err)
	return st.Groups[0]
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
		// Text PostgreSQL refuses (invalid UTF-8, NUL: SQLSTATE 22021)
		// or longer than any stored value is refused before it is sent.
		{"/jobs?group=emails&key=%ff", http.StatusBadRequest, `key "\xff" is not valid UTF-8`},
		{"/jobs?group=emails&kind=%00", http.StatusBadRequest, `kind "\x00" is not valid UTF-8 text (or holds a NUL)`},
		{"/jobs?group=%ff", http.StatusBadRequest, `group "\xff" is not valid UTF-8`},
		{"/jobs?group=emails&key=" + strings.Repeat("k", 256), http.StatusBadRequest, "key is 256 bytes long; at most 255"},
		{"/jobs?group=emails&kind=" + strings.Repeat("k", 101), http.StatusBadRequest, "kind is 101 bytes long; at most 100"},
		{"/groups/%ff", http.StatusBadRequest, `group "\xff" is not valid UTF-8`},
		{"/groups/a%00b", http.StatusBadRequest, `group "a\x00b" is not valid UTF-8`},
		{"/batches?group=%ff", http.StatusBadRequest, `group "\xff" is not valid UTF-8`},
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
	if r := e.get("/jobs?group=emails&partition=99"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("partition out of range: %d; want 400", r.StatusCode)
	}
	// The log has each failed request with its path and status.
	if !strings.Contains(e.log.String(), `"path":"/groups/nope","status":404`) {
		t.Errorf("the log does not record the failed request:\n%s", e.log.String())
	}
}

// With its database closed, every page answers 503 saying so (by the
// kind of failure and an error id, see TestDatabaseErrorsAreNotShown), not
// a 500 or a panic.
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
	if _, err := ui.New(db, ui.Config{ScanTime: -time.Second}); !errors.Is(err, ui.ErrInvalidConfig) {
		t.Errorf("negative ScanTime: err = %v; want ErrInvalidConfig", err)
	}
	for _, n := range []int{-1, queue.MaxListLimit*10 + 1} {
		if _, err := ui.New(db, ui.Config{Scan: n}); !errors.Is(err, ui.ErrInvalidConfig) {
			t.Errorf("Scan %d: err = %v; want ErrInvalidConfig", n, err)
		}
	}
}

// A filter matching one old job among more than a scan's worth of newer
// ones: the first page is cut short by the scan bound and says so in
// #scan-note, with the ids searched and a link to search older jobs, which
// finds it.
func TestJobsScanNote(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	const scan = 200
	e := newEnv(t, ui.Config{Scan: scan})
	rare := e.enqueue(queue.Job{Args: kinded{K: "rare", Text: "old"}})
	jobs := make([]queue.Job, scan+10)
	for i := range jobs {
		jobs[i] = queue.Job{Group: "emails", Args: note{Text: "x"}}
	}
	_, err := e.q.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)

	r := e.page("/jobs?group=emails&kind=rare")
	note := byID(r.Doc, "scan-note")
	if note == nil {
		t.Fatalf("no #scan-note on a page cut short; #jobs = %q", text(byID(r.Doc, "jobs")))
	}
	if !strings.Contains(text(note), fmt.Sprintf("Searched %d jobs", scan)) || !strings.Contains(text(note), "the newest") {
		t.Errorf("#scan-note = %q", text(note))
	}
	older := all(note, func(n *nodeT) bool { return n.Data == "a" })
	if len(older) != 1 || !strings.Contains(attr(older[0], "href"), "before=") {
		t.Fatalf("#scan-note has no link to search older jobs: %q", text(note))
	}
	r = e.page(attr(older[0], "href"))
	if rows := withAttr(byID(r.Doc, "jobs"), "data-job", itoa(rare)); len(rows) != 1 {
		t.Fatalf("searching older jobs did not find job %d: %q", rare, text(byID(r.Doc, "jobs")))
	}
	// A page that filled, or that searched every job, has no note.
	if r := e.page("/jobs?group=emails"); byID(r.Doc, "scan-note") != nil {
		t.Error("a full page shows #scan-note")
	}
}
