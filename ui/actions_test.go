package ui_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// flash follows r's redirect with b and returns the text of the page's
// #flash, failing unless r is a 303 to want.
func (b *browser) follow(t *testing.T, r response, want string) string {
	t.Helper()
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
		t.Fatalf("action: %d to %q; want 303 to %q:\n%s", r.StatusCode, r.Header.Get("Location"), want, text(byID(r.Doc, "error-message")))
	}
	page := b.get(want)
	return text(byID(page.Doc, "flash"))
}

// Each action, submitted from its page's form, changes the state in the
// database, redirects back with a flash saying so, and is logged with its
// actor.
func TestActionsChangeState(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{AllowActions: true, Actor: func(r *http.Request) string { return r.Header.Get("X-User") }})
	stop := e.startWorkers(1)
	e.waitHeld()
	id := e.enqueue(queue.Job{Args: note{Text: "boom", Fail: true}, MaxAttempts: 1})
	e.waitState(id, queue.StateDiscarded)
	stop() // nothing runs the jobs from here: their states are the actions'
	b := e.browser()
	jobPage := "/jobs/" + itoa(id)

	// Retry a discarded job: pending.
	r := b.get(jobPage)
	if msg := b.follow(t, b.submit(r, "retry-form", nil), jobPage); msg != fmt.Sprintf("retried job %d", id) {
		t.Errorf("#flash after retry = %q", msg)
	}
	if s := e.state(id); s != queue.StatePending {
		t.Fatalf("after retry the job is %s; want pending", s)
	}
	// Cancel it: cancelled.
	r = b.get(jobPage)
	if msg := b.follow(t, b.submit(r, "cancel-form", nil), jobPage); msg != fmt.Sprintf("cancelled job %d", id) {
		t.Errorf("#flash after cancel = %q", msg)
	}
	if s := e.state(id); s != queue.StateCancelled {
		t.Fatalf("after cancel the job is %s; want cancelled", s)
	}
	if text(byID(b.get(jobPage).Doc, "job-state")) != "cancelled" {
		t.Error("the job's page does not show it cancelled")
	}
	// The flash was shown once: the next load has none.
	if f := byID(b.get(jobPage).Doc, "flash"); f != nil {
		t.Errorf("#flash shown again: %q", text(f))
	}

	// Pause a kind, then the group, and resume both.
	r = b.get("/groups/emails")
	if msg := b.follow(t, b.submit(r, "pause-form", url.Values{"kind": {"note"}, "reason": {"deploy"}}), "/groups/emails"); msg != "paused kind note of group emails" {
		t.Errorf("#flash after pause = %q", msg)
	}
	r = b.get("/groups/emails")
	b.follow(t, b.submit(r, "pause-form", nil), "/groups/emails")
	ps, err := e.q.Paused(ctx, "emails")
	pgtest.Must(t, err)
	if len(ps) != 2 || ps[0].Kind != "" || ps[1].Kind != "note" || ps[1].Reason != "deploy" {
		t.Fatalf("Paused = %+v; want the group and kind note (reason deploy)", ps)
	}
	r = b.get("/groups/emails")
	if byID(r.Doc, "resume") == nil || len(all(byID(r.Doc, "pauses"), func(n *nodeT) bool { return hasClass(n, "resume") })) != 2 {
		t.Fatal("want a button.resume per pause, #resume for the group's")
	}
	for _, f := range all(byID(r.Doc, "pauses"), func(n *nodeT) bool { return n.Data == "form" }) {
		f.Attr = append(f.Attr, attrOf("id", "resume-form"))
		b.follow(t, b.submit(r, "resume-form", nil), "/groups/emails")
		f.Attr = f.Attr[:len(f.Attr)-1]
	}
	ps, err = e.q.Paused(ctx, "emails")
	pgtest.Must(t, err)
	if len(ps) != 0 {
		t.Fatalf("after resuming both, Paused = %+v", ps)
	}

	// Cancel a batch whose items wait: cancelled, and its items too.
	_, err = e.q.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: "big"})
	pgtest.Must(t, err)
	_, err = e.q.AddItems(ctx, "emails", "big", queue.Item{ID: "1", Args: note{Text: "1"}}, queue.Item{ID: "2", Args: note{Text: "2"}})
	pgtest.Must(t, err)
	bi, err := e.q.Batch(ctx, "emails", "big")
	pgtest.Must(t, err)
	batchPage := "/batches/" + itoa(bi.ID)
	r = b.get(batchPage)
	if msg := b.follow(t, b.submit(r, "cancel-batch-form", nil), batchPage); !strings.Contains(msg, "cancelled batch big of group emails (2 pending items cancelled)") {
		t.Errorf("#flash after cancel batch = %q", msg)
	}
	bi, err = e.q.BatchByID(ctx, bi.ID)
	pgtest.Must(t, err)
	if bi.State() != queue.BatchCancelled || bi.Cancelled != 2 {
		t.Fatalf("after cancel the batch is %s with %d cancelled; want cancelled, 2", bi.State(), bi.Cancelled)
	}

	log := e.log.String()
	for _, a := range []string{"retry", "cancel", "pause", "resume", "cancel-batch"} {
		if !strings.Contains(log, `"msg":"ui: action"`) || !strings.Contains(log, `"action":"`+a+`"`) {
			t.Errorf("no log of action %s", a)
		}
	}
	// No actor header: the remote address names the actor.
	if !strings.Contains(log, `"actor":"192.0.2.1:1234"`) {
		t.Errorf("the log does not name the actor:\n%s", log)
	}
}

// Forged requests change nothing: no token, a wrong token, a cross-site
// request with the right token, and a GET; the same request done right
// then succeeds (the checks are what refused them).
func TestActionsRefuseForgery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{AllowActions: true})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}})
	b := e.browser()
	page := b.get("/jobs/" + itoa(id))
	token := attr(all(byID(page.Doc, "cancel-form"), func(n *nodeT) bool { return attr(n, "name") == "csrf" })[0], "value")
	if c := b.cookies["leasehold_csrf"]; c == nil || c.Value != token || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("the csrf cookie %+v does not carry the form's token with HttpOnly, SameSite=Strict, Path=/", c)
	}
	form := func(tok string) url.Values {
		v := url.Values{"id": {itoa(id)}, "return": {"/jobs/" + itoa(id)}}
		if tok != "" {
			v.Set("csrf", tok)
		}
		return v
	}
	for _, c := range []struct {
		name string
		do   func() response
		want int
	}{
		{"no token", func() response { return b.post("/actions/cancel", form("")) }, http.StatusForbidden},
		{"wrong token", func() response { return b.post("/actions/cancel", form(strings.Repeat("A", 43))) }, http.StatusForbidden},
		{"no cookie", func() response {
			nb := e.browser()
			return nb.post("/actions/cancel", form(token))
		}, http.StatusForbidden},
		{"cross-site", func() response {
			req := postReq("/actions/cancel", form(token))
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			return b.send(req)
		}, http.StatusForbidden},
		{"other origin", func() response {
			req := postReq("/actions/cancel", form(token))
			req.Header.Del("Sec-Fetch-Site")
			req.Header.Set("Origin", "https://evil.example")
			return b.send(req)
		}, http.StatusForbidden},
		{"GET", func() response { return b.get("/actions/cancel?" + form(token).Encode()) }, http.StatusMethodNotAllowed},
	} {
		r := c.do()
		if r.StatusCode != c.want {
			t.Errorf("%s: %d; want %d", c.name, r.StatusCode, c.want)
		}
		if c.want == http.StatusMethodNotAllowed && r.Header.Get("Allow") != http.MethodPost {
			t.Errorf("%s: Allow %q; want POST", c.name, r.Header.Get("Allow"))
		}
		if s := e.state(id); s != queue.StatePending {
			t.Fatalf("%s changed the job: %s", c.name, s)
		}
	}
	// Control: the right token, same origin.
	b.follow(t, b.post("/actions/cancel", form(token)), "/jobs/"+itoa(id))
	if s := e.state(id); s != queue.StateCancelled {
		t.Fatalf("the genuine request did not cancel the job: %s", s)
	}
	if !strings.Contains(e.log.String(), `"msg":"ui: action refused"`) {
		t.Error("refusals are not logged")
	}
}

func postReq(path string, form url.Values) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, "http://example.com"+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.RemoteAddr = "192.0.2.1:1234"
	return req
}

// Read-only (the default): no page has a form that posts, and every
// action answers 404 whatever the request, changing nothing.
func TestReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}})
	_, err := e.q.Cancel(ctx, e.enqueue(queue.Job{Args: note{Text: "y"}}))
	pgtest.Must(t, err)
	b := e.browser()
	for _, p := range []string{"/", "/groups/emails", "/jobs/" + itoa(id), "/jobs/" + itoa(id+1), "/batches"} {
		r := b.get(p)
		if posts := all(r.Doc, func(n *nodeT) bool { return n.Data == "form" && strings.EqualFold(attr(n, "method"), "post") }); len(posts) != 0 {
			t.Errorf("%s: %d forms that post in a read-only UI", p, len(posts))
		}
		if byID(r.Doc, "pause-form") != nil || byID(r.Doc, "cancel-form") != nil || byID(r.Doc, "retry-form") != nil {
			t.Errorf("%s: an action form in a read-only UI", p)
		}
	}
	if _, ok := b.cookies["leasehold_csrf"]; ok {
		t.Error("a read-only UI sets a csrf cookie")
	}
	for _, a := range []string{"retry", "cancel", "pause", "resume", "cancel-batch"} {
		for _, m := range []string{http.MethodPost, http.MethodGet} {
			req := postReq("/actions/"+a, url.Values{"id": {itoa(id)}, "group": {"emails"}, "name": {"x"}})
			req.Method = m
			if r := e.do(req); r.StatusCode != http.StatusNotFound {
				t.Errorf("%s /actions/%s: %d; want 404", m, a, r.StatusCode)
			}
		}
	}
	if s := e.state(id); s != queue.StatePending {
		t.Fatalf("a read-only UI changed job %d: %s", id, s)
	}
	ps, err := e.q.Paused(ctx, "emails")
	pgtest.Must(t, err)
	if len(ps) != 0 {
		t.Fatalf("a read-only UI paused: %+v", ps)
	}
}

// An action goes back only to a page of the UI: any other return (another
// host, a scheme, //host, a path outside Config.Path) goes to the
// overview.
func TestActionReturnIsNoOpenRedirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{AllowActions: true, Path: "/queue"})
	b := e.browser()
	b.get("/queue/")
	tok := b.cookies["leasehold_csrf"].Value
	for ret, want := range map[string]string{
		"/queue/jobs/1?x=1":          "/queue/jobs/1?x=1",
		"/queue/":                    "/queue/",
		"https://evil.example/queue": "/queue/",
		"//evil.example/queue/":      "/queue/",
		"/\\evil.example/queue/":     "/queue/",
		"/other":                     "/queue/",
		"/queueX/jobs":               "/queue/",
		"/queue/../admin":            "/queue/",
		"javascript:alert(1)":        "/queue/",
		"":                           "/queue/",
	} {
		r := b.post("/queue/actions/pause", url.Values{"csrf": {tok}, "group": {"emails"}, "return": {ret}})
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Errorf("return %q: %d to %q; want 303 to %q", ret, r.StatusCode, r.Header.Get("Location"), want)
		}
	}
}

// attrOf returns an HTML attribute.
func attrOf(k, v string) htmlAttr { return htmlAttr{Key: k, Val: v} }

