package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

type userKey struct{}

// requireUser is an application's authentication: it lets requests with
// an X-User header through, with the user in their context.
func requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := r.Header.Get("X-User")
		if u == "" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// Mounted under /queue in an application's mux behind its authentication:
// every link, form and asset of every page is under /queue, the actions
// work there, and the log names the user who acted.
func TestMountedUnderAPathBehindAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{Path: "/queue", AllowActions: true,
		Actor: func(r *http.Request) string { u, _ := r.Context().Value(userKey{}).(string); return u }})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}})
	mux := http.NewServeMux()
	mux.Handle("/queue/", requireUser(e.h))
	mux.Handle("/queue", requireUser(e.h))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("the application")) })
	e.h = mux
	b := e.browser()
	as := func(r *http.Request) *http.Request { r.Header.Set("X-User", "alice"); return r }

	if r := e.get("/queue/"); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no user: %d; want the middleware's 401", r.StatusCode)
	}
	if r := b.send(as(httptest.NewRequest(http.MethodGet, "/queue", nil))); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/queue/" {
		t.Errorf("GET /queue: %d to %q; want 301 to /queue/", r.StatusCode, r.Header.Get("Location"))
	}
	var page response
	for _, p := range []string{"/queue/", "/queue/groups/emails", "/queue/jobs?group=emails", "/queue/jobs/" + itoa(id), "/queue/batches"} {
		r := b.send(as(httptest.NewRequest(http.MethodGet, p, nil)))
		if r.StatusCode >= 500 && !strings.HasPrefix(p, "/queue/jobs?") { // the list waits for queue.Client.Page
			t.Errorf("GET %s = %d", p, r.StatusCode)
		}
		for _, n := range all(r.Doc, func(n *nodeT) bool { return hasAttr(n, "href") || hasAttr(n, "src") || hasAttr(n, "action") }) {
			for _, k := range []string{"href", "src", "action"} {
				// A data: URL (the empty icon) requests nothing.
				if v := attr(n, k); hasAttr(n, k) && !strings.HasPrefix(v, "/queue/") && !strings.HasPrefix(v, "#") && !strings.HasPrefix(v, "data:") {
					t.Errorf("GET %s: <%s %s=%q> is not under /queue/", p, n.Data, k, v)
				}
			}
		}
		if strings.HasPrefix(p, "/queue/jobs/") {
			page = r
		}
	}
	if c := b.cookies["leasehold_csrf"]; c == nil || c.Path != "/queue" {
		t.Fatalf("csrf cookie %+v; want Path /queue", c)
	}
	form := url.Values{}
	for _, in := range all(byID(page.Doc, "cancel-form"), func(n *nodeT) bool { return n.Data == "input" }) {
		form.Set(attr(in, "name"), attr(in, "value"))
	}
	r := b.send(as(postReq("/queue/actions/cancel", form)))
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/queue/jobs/"+itoa(id) {
		t.Fatalf("cancel: %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	if s := e.state(id); s != queue.StateCancelled {
		t.Fatalf("job %d is %s; want cancelled", id, s)
	}
	if !strings.Contains(e.log.String(), `"actor":"alice"`) {
		t.Errorf("the action's log does not name alice:\n%s", e.log.String())
	}
	// Outside /queue, the application answers; the UI does not.
	if r := e.get("/jobs/" + itoa(id)); r.Body != "the application" {
		t.Errorf("GET /jobs/%d reached %q", id, r.Body)
	}
}

// A handler given a request outside its Path (mounted without the
// application's mux routing by prefix) answers 404.
func TestOutsidePathIs404(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{Path: "/queue"})
	for _, p := range []string{"/", "/queuex/", "/jobs/1"} {
		if r := e.get(p); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d; want 404", p, r.StatusCode)
		}
	}
}

// Every page marks its live regions with data-live and an id, loads
// live.js with the refresh period, and says to reload without JavaScript;
// Refresh negative leaves the script out.
func TestLiveRegions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	id := e.enqueue(queue.Job{Args: note{Text: "x"}})
	for _, p := range []string{"/", "/groups/emails", "/jobs?group=emails", "/jobs/" + itoa(id), "/batches"} {
		r := e.get(p)
		live := all(r.Doc, func(n *nodeT) bool { return hasAttr(n, "data-live") })
		if len(live) < 2 {
			t.Errorf("%s: %d live regions", p, len(live))
		}
		for _, n := range live {
			if attr(n, "id") == "" {
				t.Errorf("%s: a live <%s> without an id", p, n.Data)
			}
		}
		body := all(r.Doc, func(n *nodeT) bool { return n.Data == "body" })[0]
		if attr(body, "data-refresh") != "2000" || len(all(r.Doc, func(n *nodeT) bool { return n.Data == "script" })) != 1 {
			t.Errorf("%s: data-refresh %q, want 2000 and live.js", p, attr(body, "data-refresh"))
		}
		if !strings.Contains(r.Body, "reload to update") {
			t.Errorf("%s: no noscript note", p)
		}
	}
	off := newEnv(t, ui.Config{Refresh: -1})
	r := off.page("/")
	if len(all(r.Doc, func(n *nodeT) bool { return n.Data == "script" })) != 0 || strings.Contains(r.Body, "reload to update") {
		t.Error("Refresh -1: the page still loads live.js")
	}
	if js := e.get("/assets/live.js").Body; !strings.Contains(js, "data-live") || !strings.Contains(js, "dataset.updated") {
		t.Error("live.js does not replace [data-live] or count updates")
	}
}
