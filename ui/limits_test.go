package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// An action's text fields that PostgreSQL would refuse (invalid UTF-8, a
// NUL) or that are longer than any stored value get 400 saying so, change
// nothing, and are not the database's fault (no 503).
func TestActionBadTextIs400(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{AllowActions: true})
	b := e.browser()
	r := b.get("/groups/emails")
	for _, c := range []struct {
		form url.Values
		says string
	}{
		{url.Values{"kind": {"\xff"}}, `kind "\xff" is not valid UTF-8`},
		{url.Values{"kind": {"a\x00"}}, `kind "a\x00" is not valid UTF-8`},
		{url.Values{"kind": {strings.Repeat("k", 101)}}, "kind is 101 bytes long"},
		{url.Values{"reason": {"\xfe"}}, `reason "\xfe" is not valid UTF-8`},
		{url.Values{"group": {"\xff"}}, `group "\xff" is not valid UTF-8`},
	} {
		got := b.submit(r, "pause-form", c.form)
		if msg := text(byID(got.Doc, "error-message")); got.StatusCode != http.StatusBadRequest || !strings.Contains(msg, c.says) {
			t.Errorf("pause with %q: %d %q; want 400 saying %q", c.form, got.StatusCode, msg, c.says)
		}
	}
	csrf := attr(all(byID(r.Doc, "pause-form"), func(n *nodeT) bool { return attr(n, "name") == "csrf" })[0], "value")
	for _, form := range []url.Values{
		{"group": {"emails"}, "name": {"\xff"}},
		{"group": {"emails"}, "name": {strings.Repeat("n", 256)}},
		{"group": {"e\x00"}, "name": {"n"}},
	} {
		form.Set("csrf", csrf)
		if got := b.post("/actions/cancel-batch", form); got.StatusCode != http.StatusBadRequest {
			t.Errorf("cancel-batch %q: %d %q; want 400", form, got.StatusCode, text(byID(got.Doc, "error-message")))
		}
	}
	ps, err := e.q.Paused(ctx, "emails")
	pgtest.Must(t, err)
	if len(ps) != 0 {
		t.Errorf("pauses after refused actions: %v", ps)
	}
}

// Config.Timeout bounds a page's reads: with the jobs table locked (a
// migration, a long transaction), the page answers 503 saying the database
// did not answer in time, instead of waiting for the lock. The negative
// control: with no timeout the same request is still waiting once it waits
// on the lock, and answers 200 once the lock is released.
func TestPageTimeout(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{Timeout: 300 * time.Millisecond})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}})
	tx, err := e.pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.Background())
	_, err = tx.Exec(ctx, `LOCK TABLE `+e.db.Schema()+`.jobs IN ACCESS EXCLUSIVE MODE`)
	pgtest.Must(t, err)

	for _, p := range []string{"/jobs/" + itoa(id), "/jobs?group=emails"} {
		r := e.get(p)
		msg := text(byID(r.Doc, "error-message")) + text(byID(r.Doc, "jobs-error"))
		if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(msg, "the database did not answer within 300ms") {
			t.Errorf("GET %s with jobs locked: %d %q; want 503 saying the database did not answer within 300ms", p, r.StatusCode, msg)
		}
	}

	off, err := ui.New(e.db, ui.Config{Timeout: -1})
	pgtest.Must(t, err)
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		off.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/jobs/"+itoa(id), nil))
		done <- rec.Code
	}()
	eventually(t, func() error { // the request waits on the lock
		var n int
		pgtest.Must(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`,
			e.db.Schema()+".jobs").Scan(&n))
		if n == 0 {
			return errNotYet
		}
		return nil
	})
	select {
	case code := <-done:
		t.Fatalf("with no timeout, the page answered %d while waiting on the lock", code)
	default:
	}
	pgtest.Must(t, tx.Rollback(ctx))
	if code := <-done; code != http.StatusOK {
		t.Errorf("with no timeout, after the lock was released: %d; want 200", code)
	}
}

// errNotYet is eventually's error while a condition does not hold yet.
var errNotYet = errorString("not yet")

type errorString string

func (e errorString) Error() string { return string(e) }

// Mounted at /queue, a path to clean redirects to its clean form under
// /queue (ServeMux alone would send it to the clean path without /queue);
// an unclean action path is 404, not redirected; the assets directory is
// not listed.
func TestUncleanPathsStayUnderPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{Path: "/queue", AllowActions: true})
	for p, want := range map[string]string{
		"/queue//jobs":           "/queue/jobs",
		"/queue/./jobs":          "/queue/jobs",
		"/queue/assets/../jobs":  "/queue/jobs",
		"/queue/jobs/../batches": "/queue/batches",
		"/queue//jobs?group=x":   "/queue/jobs?group=x",
		"/queue/groups//emails/": "/queue/groups/emails/",
	} {
		r := e.get(p)
		if loc := r.Header.Get("Location"); r.StatusCode/100 != 3 || loc != want {
			t.Errorf("GET %s: %d to %q; want a redirect to %q", p, r.StatusCode, loc, want)
		}
	}
	// A group named with slashes and dots is linked escaped, which is a
	// clean path: served, not redirected.
	_, err := e.q.EnsureGroup(pgtest.Context(t), "a/../b", 1)
	pgtest.Must(t, err)
	if r := e.get("/queue/groups/" + urlSeg("a/../b")); r.StatusCode != http.StatusOK || text(byID(r.Doc, "summary")) == "" {
		t.Errorf("GET /queue/groups/%s: %d; want the group's page", urlSeg("a/../b"), r.StatusCode)
	}
	req := postReq("/queue//actions/cancel", url.Values{"id": {"1"}})
	if r := e.do(req); r.StatusCode != http.StatusNotFound {
		t.Errorf("POST /queue//actions/cancel: %d; want 404", r.StatusCode)
	}
	for _, p := range []string{"/queue/assets/", "/queue/assets", "/queue/assets//", "/queue/assets/nope.css"} {
		if r := e.get(p); r.StatusCode != http.StatusNotFound && !(r.StatusCode/100 == 3 && strings.HasPrefix(r.Header.Get("Location"), "/queue/")) {
			t.Errorf("GET %s: %d %q; want 404", p, r.StatusCode, r.Header.Get("Location"))
		}
	}
	if r := e.get("/queue/assets/"); r.StatusCode != http.StatusNotFound || strings.Contains(r.Body, `href="style.css"`) {
		t.Errorf("GET /queue/assets/: %d; want 404 without a listing", r.StatusCode)
	}
	if r := e.get("/queue/assets/style.css"); r.StatusCode != http.StatusOK {
		t.Errorf("GET /queue/assets/style.css: %d", r.StatusCode)
	}
}

// The CSRF cookie is SameSite=Lax, HttpOnly, of the UI's path: a link
// followed from another site sends it (a Strict one would not, and the UI
// would replace it, failing the forms of the other open tabs), and a
// cross-site POST does not. A page loaded with the cookie keeps it: the
// token of a form loaded earlier still posts.
func TestCSRFCookieIsLax(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{Path: "/queue", AllowActions: true})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}, RunAt: time.Now().Add(time.Hour)})
	b := e.browser()
	old := b.get("/queue/jobs/" + itoa(id)) // the tab left open
	c := b.cookies["leasehold_csrf"]
	if c == nil || c.SameSite != http.SameSiteLaxMode || !c.HttpOnly || c.Path != "/queue" {
		t.Fatalf("csrf cookie %+v; want SameSite=Lax, HttpOnly, Path=/queue", c)
	}
	// Another tab follows a link from elsewhere: the browser sends the Lax
	// cookie with that navigation, and the page sets no new one.
	req := httptest.NewRequest(http.MethodGet, "/queue/groups/emails", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Referer", "https://chat.example/")
	r := b.send(req)
	if len(r.Cookies()) != 0 {
		t.Errorf("a cross-site navigation carrying the cookie set %v", r.Cookies())
	}
	if got := b.submit(old, "cancel-form", nil); got.StatusCode != http.StatusSeeOther {
		t.Errorf("the earlier tab's cancel: %d %q; want 303", got.StatusCode, text(byID(got.Doc, "error-message")))
	}
	if s := e.state(id); s != queue.StateCancelled {
		t.Errorf("job %d is %s; want cancelled", id, s)
	}
}
