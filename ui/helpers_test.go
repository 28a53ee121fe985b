package ui_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/net/html"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
	"github.com/leasehold/leasehold/worker"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// note is the args of the tests' jobs: the handler fails them when Fail
// is set, and blocks while Block is set until the test ends.
type note struct {
	Text  string `json:"text"`
	Fail  bool   `json:"fail,omitempty"`
	Block bool   `json:"block,omitempty"`
}

func (note) Kind() string { return "note" }

// kinded is args whose kind is chosen by the test.
type kinded struct {
	K    string `json:"-"`
	Text string `json:"text"`
}

func (k kinded) Kind() string { return k.K }

// env is a database with a group and a handler over it.
type env struct {
	t    *testing.T
	pool *pgxpool.Pool
	db   *leasehold.DB
	q    *queue.Client
	h    http.Handler
	log  *logtest.Buffer
}

// newEnv returns an env with group "emails" of 4 partitions and a handler
// of cfg (its Logger set to a buffer the test reads).
func newEnv(t *testing.T, cfg ui.Config) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	q, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	_, err = q.EnsureGroup(pgtest.Context(t), "emails", 4)
	pgtest.Must(t, err)
	e := &env{t: t, pool: pool, db: db, q: q, log: &logtest.Buffer{}}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	e.h, err = ui.New(db, cfg)
	pgtest.Must(t, err)
	return e
}

// startWorkers starts n workers of group "emails" running note jobs: a
// note with Fail fails (and is discarded at its last attempt), one with
// Block runs until its worker stops. It returns a function stopping them
// (also called when the test ends).
func (e *env) startWorkers(n int) (stop func()) {
	e.t.Helper()
	ctx := pgtest.Context(e.t)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[note]) error {
		switch {
		case w.Args.Fail:
			return errors.New("failed on purpose: " + w.Args.Text)
		case w.Args.Block:
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	var stops []func()
	for i := range n {
		w, err := worker.New(e.db, worker.Config{Group: "emails", Partitions: 4, ID: "worker-" + string(rune('a'+i)), Workers: ws,
			Lease:                  lease.Config{TTL: 2 * time.Second},
			MembershipPollInterval: 100 * time.Millisecond,
			StopGrace:              200 * time.Millisecond, HandoffTimeout: time.Second,
			Queue: queue.ProcessorConfig{PollInterval: 20 * time.Millisecond, MinRetry: 10 * time.Millisecond,
				MaxRetry: 20 * time.Millisecond, PublishInterval: 100 * time.Millisecond}})
		pgtest.Must(e.t, err)
		pgtest.Must(e.t, w.Start(ctx))
		stops = append(stops, sync.OnceFunc(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w.Stop(ctx)
		}))
	}
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	e.t.Cleanup(stop)
	return stop
}

// waitHeld waits until every partition of "emails" is held.
func (e *env) waitHeld() admin.GroupStatus {
	e.t.Helper()
	ctx := pgtest.Context(e.t)
	for {
		st, err := admin.ReadStatus(ctx, e.db, []string{"emails"})
		pgtest.Must(e.t, err)
		if g := st.Groups[0]; g.Held == g.PartitionCount {
			return g
		}
		select {
		case <-ctx.Done():
			e.t.Fatal("the workers never held every partition")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// eventually calls check until it returns nil, failing the test with its
// last error if it never does before the test's context ends.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	ctx := pgtest.Context(t)
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// enqueue enqueues j and returns its id.
func (e *env) enqueue(j queue.Job) int64 {
	e.t.Helper()
	if j.Group == "" {
		j.Group = "emails"
	}
	res, err := e.q.Enqueue(pgtest.Context(e.t), j)
	pgtest.Must(e.t, err)
	return res.ID
}

// state returns job id's stored state.
func (e *env) state(id int64) queue.JobState {
	e.t.Helper()
	j, err := e.q.JobInfo(pgtest.Context(e.t), id)
	pgtest.Must(e.t, err)
	return j.State
}

// waitState waits until job id is in state want.
func (e *env) waitState(id int64, want queue.JobState) {
	e.t.Helper()
	ctx := pgtest.Context(e.t)
	for e.state(id) != want {
		select {
		case <-ctx.Done():
			e.t.Fatalf("job %d is %s; want %s", id, e.state(id), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// response is a response read in full.
type response struct {
	*http.Response
	Body string
	Doc  *html.Node
}

// do serves req and returns its response, its body parsed as HTML.
func (e *env) do(req *http.Request) response {
	e.t.Helper()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		e.t.Fatalf("%s %s: body does not parse: %v", req.Method, req.URL, err)
	}
	return response{Response: res, Body: string(b), Doc: doc}
}

// get serves GET path.
func (e *env) get(path string) response {
	e.t.Helper()
	return e.do(httptest.NewRequest(http.MethodGet, path, nil))
}

// page serves GET path and fails the test unless it answers 200.
func (e *env) page(path string) response {
	e.t.Helper()
	r := e.get(path)
	if r.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s = %d; want 200:\n%s", path, r.StatusCode, text(r.Doc))
	}
	return r
}

// browser is a client that keeps the UI's cookies, as a browser would.
type browser struct {
	e       *env
	cookies map[string]*http.Cookie
}

func (e *env) browser() *browser { return &browser{e: e, cookies: map[string]*http.Cookie{}} }

// get loads path with b's cookies, and keeps the cookies it sets.
func (b *browser) get(path string) response {
	b.e.t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	return b.send(req)
}

func (b *browser) send(req *http.Request) response {
	b.e.t.Helper()
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	r := b.e.do(req)
	for _, c := range r.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return r
}

// post posts form to path with b's cookies as a same-origin browser
// request (Sec-Fetch-Site: same-origin).
func (b *browser) post(path string, form url.Values) response {
	b.e.t.Helper()
	return b.send(postReq(path, form))
}

// submit posts the form of id on page r (its hidden fields, and the
// fields given), as a browser clicking its button.
func (b *browser) submit(r response, id string, fields url.Values) response {
	b.e.t.Helper()
	f := byID(r.Doc, id)
	if f == nil {
		b.e.t.Fatalf("no form#%s on the page", id)
	}
	form := url.Values{}
	for _, in := range all(f, func(n *html.Node) bool { return n.Data == "input" }) {
		if attr(in, "type") == "hidden" {
			form.Add(attr(in, "name"), attr(in, "value"))
		}
	}
	for k, vs := range fields {
		form[k] = vs
	}
	return b.post(attr(f, "action"), form)
}

// all returns the element nodes under n for which match is true.
func all(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

// byID returns the element of id under n, nil if none.
func byID(n *html.Node, id string) *html.Node {
	els := all(n, func(d *html.Node) bool { return attr(d, "id") == id })
	if len(els) == 0 {
		return nil
	}
	return els[0]
}

// withAttr returns the elements under n whose attribute key is val.
func withAttr(n *html.Node, key, val string) []*html.Node {
	return all(n, func(d *html.Node) bool { return hasAttr(d, key) && attr(d, key) == val })
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text returns the text under n, its whitespace collapsed.
func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
			b.WriteString(" ")
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// hasClass reports whether n has class c.
func hasClass(n *html.Node, c string) bool {
	for _, f := range strings.Fields(attr(n, "class")) {
		if f == c {
			return true
		}
	}
	return false
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// nodeT is an HTML node.
type nodeT = html.Node

// htmlAttr is an HTML attribute.
type htmlAttr = html.Attribute

// parse parses an HTML document.
func parse(t *testing.T, s string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func urlSeg(s string) string   { return url.PathEscape(s) }
func urlQuery(s string) string { return url.QueryEscape(s) }
