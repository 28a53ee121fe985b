package ui_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// payloads are markup that would run script if a page printed it raw.
var payloads = []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`}

// checkEscaped returns an error if body holds a payload raw, holds none
// escaped when wantEscaped, or if its document has a script other than
// the UI's live.js or an element with an event-handler attribute.
func checkEscaped(r response, wantEscaped bool) error {
	var errs []error
	escaped := 0
	for _, p := range payloads {
		if strings.Contains(r.Body, p) {
			errs = append(errs, fmt.Errorf("payload %q appears unescaped", p))
		}
		if strings.Contains(r.Body, strings.NewReplacer("<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(p)) {
			escaped++
		}
	}
	if wantEscaped && escaped == 0 {
		errs = append(errs, errors.New("no payload appears escaped: the test shows nothing"))
	}
	for _, n := range all(r.Doc, func(n *nodeT) bool { return true }) {
		if n.Data == "script" && !strings.Contains(attr(n, "src"), "/assets/live.js") {
			errs = append(errs, fmt.Errorf("a <script> that is not live.js: %q", attr(n, "src")))
		}
		if n.Data == "img" {
			errs = append(errs, errors.New("an <img> element"))
		}
		for _, a := range n.Attr {
			if strings.HasPrefix(strings.ToLower(a.Key), "on") {
				errs = append(errs, fmt.Errorf("an event handler attribute %s on <%s>", a.Key, n.Data))
			}
		}
	}
	return errors.Join(errs...)
}

// Markup in every user-provided value (a job's args, kind, key and error,
// a pause's kind and reason, a batch's name and description, a group's
// name) is shown escaped on every page and never runs.
func TestEveryValueIsEscaped(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{AllowActions: true})
	stop := e.startWorkers(1)
	e.waitHeld()
	p0, p1 := payloads[0], payloads[1]
	failed := e.enqueue(queue.Job{Key: p0, Args: note{Text: p0 + p1, Fail: true}, MaxAttempts: 1})
	e.waitState(failed, queue.StateDiscarded)
	stop()
	odd := e.enqueue(queue.Job{Key: p1, Args: kinded{K: p0, Text: p1}})
	pgtest.Must(t, e.q.Pause(ctx, "emails", p1, p0))
	_, err := e.q.CreateBatch(ctx, queue.BatchSpec{Group: "emails", Name: p0, Description: p1})
	pgtest.Must(t, err)
	_, err = e.q.AddItems(ctx, "emails", p0, queue.Item{ID: p1, Key: p0, Args: note{Text: p1}})
	pgtest.Must(t, err)
	bi, err := e.q.Batch(ctx, "emails", p0)
	pgtest.Must(t, err)
	_, err = e.q.EnsureGroup(ctx, p1, 2)
	pgtest.Must(t, err)

	b := e.browser()
	for _, p := range []string{
		"/", "/groups/emails", "/jobs/" + itoa(failed), "/jobs/" + itoa(odd), "/batches", "/batches/" + itoa(bi.ID),
		"/groups/" + urlSeg(p1), "/jobs?group=emails&key=" + urlQuery(p0) + "&kind=" + urlQuery(p1),
	} {
		r := b.get(p)
		// Until queue.Client.Page lands, the jobs list answers 503 with
		// its filter form (echoing the payloads) all the same.
		if r.StatusCode != http.StatusOK && (pageReady(t, e) || !strings.HasPrefix(p, "/jobs?")) {
			t.Errorf("GET %s = %d: %s", p, r.StatusCode, text(byID(r.Doc, "error-message")))
			continue
		}
		if err := checkEscaped(r, true); err != nil {
			t.Errorf("GET %s:\n%v", p, err)
		}
	}
	// The values are there, as text.
	r := b.get("/jobs/" + itoa(failed))
	if got := text(byID(r.Doc, "job-key")); got != p0 {
		t.Errorf("#job-key = %q; want %q", got, p0)
	}
	if got := text(byID(r.Doc, "job-errors")); !strings.Contains(got, p0+p1) {
		t.Errorf("ol#job-errors = %q; want the error's text", got)
	}
	if got := text(byID(b.get("/jobs/" + itoa(odd)).Doc, "job-kind")); got != p0 {
		t.Errorf("#job-kind = %q; want %q", got, p0)
	}
	// Bad input echoed in an error page is escaped too.
	for _, p := range []string{"/jobs/" + urlSeg(p0), "/groups/" + urlSeg(p0), "/jobs?group=emails&state=" + urlQuery(p1)} {
		r := b.get(p)
		if r.StatusCode < 400 {
			t.Errorf("GET %s = %d; want an error page", p, r.StatusCode)
		}
		if err := checkEscaped(r, true); err != nil {
			t.Errorf("GET %s:\n%v", p, err)
		}
	}
}

// The checker catches a page that prints a payload raw: the negative
// control of TestEveryValueIsEscaped.
func TestCheckEscapedCatchesRawMarkup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	r := e.page("/")
	if err := checkEscaped(r, false); err != nil {
		t.Fatalf("a clean page: %v", err)
	}
	for _, p := range payloads {
		doctored := r
		doctored.Body = strings.Replace(r.Body, "<main>", "<main>"+p, 1)
		doctored.Doc = parse(t, doctored.Body)
		if err := checkEscaped(doctored, false); err == nil {
			t.Errorf("a page holding %q raw passes the check", p)
		}
	}
	if err := checkEscaped(r, true); err == nil {
		t.Error("a page holding no payload passes a check that wants one escaped")
	}
}

// Every answer (a page, an error page, an asset) carries the security
// headers; pages have no inline script or style for the CSP to allow.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ui.Config{})
	for _, p := range []string{"/", "/jobs/abc", "/assets/live.js", "/assets/style.css"} {
		r := e.get(p)
		h := r.Header
		if csp := h.Get("Content-Security-Policy"); csp != "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'" {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("GET %s: X-Content-Type-Options %q, Referrer-Policy %q", p, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
	if ct := e.get("/assets/live.js").Header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("live.js: Content-Type %q", ct)
	}
	r := e.page("/groups/emails")
	for _, n := range all(r.Doc, func(*nodeT) bool { return true }) {
		if (n.Data == "script" && attr(n, "src") == "") || n.Data == "style" || hasAttr(n, "style") {
			t.Errorf("inline script or style: <%s>", n.Data)
		}
	}
}
