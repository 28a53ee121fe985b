package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
	"github.com/leasehold/leasehold/worker"
)

// The end-to-end tests' fleet: group e2eGroup of e2ePartitions partitions,
// run by workers w1, w2 and w3; orphanGroup has partitions and no member.
const (
	e2eGroup      = "shop"
	e2ePartitions = 12
	orphanGroup   = "orphans"
	orphanParts   = 4
	// e2eWait bounds every wait on the fleet or the browser: generous, for
	// a loaded machine; a wait ends as soon as its condition holds.
	e2eWait = 60 * time.Second
)

// Environment variables of the browser tests.
const (
	// envRequireBrowser makes a missing Chromium a failure instead of a
	// skip (.ci/run sets it).
	envRequireBrowser = "LEASEHOLD_REQUIRE_BROWSER"
	// envScreenshots names a directory to save the pages' screenshots in
	// (docs/img: see docs/ui.md).
	envScreenshots = "LEASEHOLD_UI_SCREENSHOTS"
)

// The job kinds the fleet runs.

// okJob completes.
type okJob struct {
	N int `json:"n"`
}

func (okJob) Kind() string { return "ok" }

// failJob always fails, with its note in the error.
type failJob struct {
	Note string `json:"note"`
}

func (failJob) Kind() string { return "fail" }

// slowJob runs until its context ends: it is seen running.
type slowJob struct {
	N int `json:"n"`
}

func (slowJob) Kind() string { return "slow" }

// fleet is a database, a queue client and the workers running the group.
type fleet struct {
	t       *testing.T
	pool    *pgxpool.Pool
	db      *leasehold.DB
	client  *queue.Client
	workers *queue.Workers

	mu      sync.Mutex
	running map[string]*worker.Worker
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	pool := pgtest.Pool(t)
	db := pgtest.DBOn(t, pool)
	c, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(context.Context, *queue.Work[okJob]) error { return nil })
	queue.Handle(ws, func(_ context.Context, w *queue.Work[failJob]) error {
		return errors.New("charge declined: " + w.Args.Note)
	})
	queue.Handle(ws, func(ctx context.Context, _ *queue.Work[slowJob]) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	f := &fleet{t: t, pool: pool, db: db, client: c, workers: ws, running: map[string]*worker.Worker{}}
	for _, id := range []string{"w1", "w2", "w3"} {
		f.start(id)
	}
	f.waitBalanced("w1", "w2", "w3")
	_, err = pool.Exec(pgtest.Context(t), `INSERT INTO leasehold.groups (name, partitions) VALUES ($1, $2)`, orphanGroup, orphanParts)
	pgtest.Must(t, err)
	return f
}

// start starts worker id; it is stopped when the test ends.
func (f *fleet) start(id string) *worker.Worker {
	t := f.t
	t.Helper()
	w, err := worker.New(pgtest.DBOn(t, f.pool), worker.Config{
		Group: e2eGroup, Partitions: e2ePartitions, ID: id, Workers: f.workers,
		Lease: lease.Config{TTL: 2 * time.Second},
		// Quick retries: a slow job cancelled by a handoff runs again soon.
		Queue: queue.ProcessorConfig{PollInterval: 50 * time.Millisecond,
			MinRetry: 50 * time.Millisecond, MaxRetry: 200 * time.Millisecond},
		MembershipPollInterval: 200 * time.Millisecond,
	})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(pgtest.Context(t)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	f.mu.Lock()
	f.running[id] = w
	f.mu.Unlock()
	return w
}

// waitBalanced waits until the workers ids hold every partition between
// them, each at least one.
func (f *fleet) waitBalanced(ids ...string) {
	f.t.Helper()
	f.waitFor("workers "+strings.Join(ids, ", ")+" to share the partitions", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		total := 0
		for _, id := range ids {
			n := len(f.running[id].Owned())
			if n == 0 {
				return false
			}
			total += n
		}
		return total == e2ePartitions
	})
}

// waitFor polls cond until it holds, and fails the test after e2eWait.
func (f *fleet) waitFor(what string, cond func() bool) {
	f.t.Helper()
	for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > e2eWait {
			f.t.Fatalf("waited %v for %s", e2eWait, what)
		}
	}
}

// count runs a count(*) query.
func (f *fleet) count(sql string, args ...any) int {
	f.t.Helper()
	var n int
	pgtest.Must(f.t, f.pool.QueryRow(pgtest.Context(f.t), sql, args...).Scan(&n))
	return n
}

// info reads job id.
func (f *fleet) info(id int64) queue.JobInfo {
	f.t.Helper()
	j, err := f.client.JobInfo(pgtest.Context(f.t), id)
	pgtest.Must(f.t, err)
	return j
}

// enqueue enqueues j and returns its id.
func (f *fleet) enqueue(j queue.Job) int64 {
	f.t.Helper()
	if j.Group == "" {
		j.Group = e2eGroup
	}
	res, err := f.client.Enqueue(pgtest.Context(f.t), j)
	pgtest.Must(f.t, err)
	return res.ID
}

// ids returns the ids of the jobs f selects, newest first (queue.List:
// the order the UI lists them in).
func (f *fleet) ids(flt queue.Filter) []int64 {
	f.t.Helper()
	flt.Group, flt.Limit = e2eGroup, queue.MaxListLimit
	js, err := f.client.List(pgtest.Context(f.t), flt)
	pgtest.Must(f.t, err)
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// servers are the UI's two servers on the fleet's database: one with the
// actions, one read-only.
type servers struct {
	rw, ro *httptest.Server
}

func newServers(t *testing.T, db *leasehold.DB) servers {
	t.Helper()
	serve := func(cfg ui.Config) *httptest.Server {
		cfg.Refresh = 250 * time.Millisecond // live updates come quickly
		h, err := ui.New(db, cfg)
		pgtest.Must(t, err)
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s
	}
	return servers{rw: serve(ui.Config{AllowActions: true}), ro: serve(ui.Config{})}
}

// chromium returns the path of the browser, or "" when none is installed.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// requireBrowser skips the test when no Chromium is installed, unless
// envRequireBrowser is set: then it fails it.
func requireBrowser(t *testing.T) string {
	t.Helper()
	p := chromium()
	if p == "" {
		if os.Getenv(envRequireBrowser) != "" {
			t.Fatalf("no chromium binary on PATH, and %s is set: install Debian's chromium package", envRequireBrowser)
		}
		t.Skipf("no chromium binary on PATH: install Debian's chromium package to run the browser tests (%s=1 makes this a failure)", envRequireBrowser)
	}
	return p
}

// startBrowser starts one headless Chromium for the whole test; its
// subtests open tabs in it.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := requireBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(1280, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return bctx
}

// tab is a browser tab for one subtest, recording the console's errors
// and the page's uncaught exceptions: the subtest fails on any, except
// those it allows.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string
	allowed  []string // substrings of the problems expected
}

// newTab opens a 1280x800 tab; when the subtest ends, it fails it for any
// console error or exception and closes the tab.
func newTab(t *testing.T, browser context.Context) *tab {
	t.Helper()
	// No problem is allowed by default: the pages declare an empty icon,
	// so that the browser does not ask for /favicon.ico (a 404 in the
	// console).
	tb := &tab{t: t}
	tctx, closeTab := chromedp.NewContext(browser, chromedp.WithListener(tb.listen))
	if err := chromedp.Do(tctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		closeTab()
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancel := context.WithTimeout(tctx, 2*e2eWait)
	tb.ctx = ctx
	t.Cleanup(func() {
		cancel()
		closeTab()
		tb.mu.Lock()
		defer tb.mu.Unlock()
		for _, p := range tb.problems {
			t.Errorf("browser console: %s", p)
		}
	})
	return tb
}

// listen records the console's errors and the uncaught exceptions. It runs
// in the tab's event loop: it only records.
func (tb *tab) listen(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError && ev.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var args []string
		for _, a := range ev.Args {
			args = append(args, string(a.Value)+a.Description)
		}
		p = fmt.Sprintf("console.%s(%s)", ev.Type, strings.Join(args, ", "))
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "exception: " + d.Text
		if d.Exception != nil {
			p += " " + d.Exception.Description
		}
		p += fmt.Sprintf(" at %s:%d", d.URL, d.LineNumber+1)
	case *log.EventEntryAdded:
		if ev.Entry.Level != log.EntryLevelError {
			return
		}
		p = fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
	default:
		return
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, a := range tb.allowed {
		if strings.Contains(p, a) {
			return
		}
	}
	tb.problems = append(tb.problems, p)
}

// allow expects console errors containing s.
func (tb *tab) allow(s string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.allowed = append(tb.allowed, s)
}

// expectProblem waits for a recorded console problem containing s, and
// removes it: the negative control of the console check.
func (tb *tab) expectProblem(s string) {
	tb.t.Helper()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		tb.mu.Lock()
		i := slices.IndexFunc(tb.problems, func(p string) bool { return strings.Contains(p, s) })
		if i >= 0 {
			tb.problems = slices.Delete(tb.problems, i, i+1)
		}
		tb.mu.Unlock()
		if i >= 0 {
			return
		}
		if time.Since(start) > e2eWait {
			tb.t.Fatalf("the console check did not record %q: it would miss the page's errors", s)
		}
	}
}

// open loads url and waits for its load event; it fails the test unless
// the page answers 200.
func (tb *tab) open(url string) {
	tb.t.Helper()
	resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(url))
	if err != nil {
		tb.t.Fatalf("open %s: %v", url, err)
	}
	if resp.Status != 200 {
		tb.t.Fatalf("open %s: status %d", url, resp.Status)
	}
}

// click clicks the element sel selects, which submits a form or follows a
// link, and waits for the page it leads to; it returns that page's status.
// The click is the element's click() in the page, found and clicked in one
// step: a live update may replace the element between the two steps of a
// click by the protocol (find the node, then press the mouse on it).
func (tb *tab) click(sel string) int64 {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, chromedp.Evaluate[chromedp.Void](
		fmt.Sprintf(`document.querySelector(%s).click()`, js(sel))))
	if err != nil {
		tb.t.Fatalf("click %s: %v", sel, err)
	}
	return resp.Status
}

// eval evaluates the JavaScript expression expr in the page.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// evalAsync evaluates expr, a promise, and returns its value.
func evalAsync[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// count is how many elements sel selects.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	return eval[int](tb, fmt.Sprintf(`document.querySelectorAll(%s).length`, js(sel)))
}

// text is the trimmed text of the first element sel selects ("" if none).
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return eval[string](tb, fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? "").trim()`, js(sel)))
}

// texts are the trimmed texts of the elements sel selects.
func (tb *tab) texts(sel string) []string {
	tb.t.Helper()
	return eval[[]string](tb, fmt.Sprintf(`Array.from(document.querySelectorAll(%s), e => e.textContent.trim())`, js(sel)))
}

// attrs are the values of attribute name of the elements sel selects.
func (tb *tab) attrs(sel, name string) []string {
	tb.t.Helper()
	return eval[[]string](tb, fmt.Sprintf(`Array.from(document.querySelectorAll(%s), e => e.getAttribute(%s) ?? "")`, js(sel), js(name)))
}

// jobIDs are the ids of the rows of table#jobs, in page order.
func (tb *tab) jobIDs() []int64 {
	tb.t.Helper()
	var ids []int64
	for _, s := range tb.attrs("table#jobs tr[data-job]", "data-job") {
		var id int64
		if _, err := fmt.Sscan(s, &id); err != nil {
			tb.t.Fatalf("tr[data-job=%q]: not an id", s)
		}
		ids = append(ids, id)
	}
	return ids
}

// wait polls the JavaScript expression cond until it is true, and fails
// the test after e2eWait, with what.
//
// chromedp's Poll runs in the JavaScript context it knows for the page's
// frame, which a navigation replaces: just after a navigation the context
// it knows may be the previous document's, gone, and the poll fails with
// "Cannot find context with specified id" (chromedp #890; seen once in CI
// on the negative control of testXSS, which navigates to another origin).
// An Evaluate takes the frame's current context; then the poll is tried
// again, until the deadline.
func (tb *tab) wait(what, cond string) {
	tb.t.Helper()
	deadline := time.Now().Add(e2eWait)
	for {
		_, err := chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			_, _ = chromedp.Run(tb.ctx, chromedp.Evaluate[chromedp.Void]("1")) // takes the new context (or fails in the old one: tried again)
			continue
		}
		if err != nil {
			tb.t.Fatalf("waiting for %s (%s): %v", what, cond, err)
		}
		return
	}
}

// updated is the page's count of live updates (0 before the first).
func (tb *tab) updated() int {
	tb.t.Helper()
	return eval[int](tb, `Number(document.documentElement.dataset.updated || 0)`)
}

// waitUpdates waits until the page has updated itself n more times than
// the count from.
func (tb *tab) waitUpdates(from, n int) {
	tb.t.Helper()
	tb.wait(fmt.Sprintf("%d live updates after %d", n, from),
		fmt.Sprintf(`Number(document.documentElement.dataset.updated || 0) >= %d`, from+n))
}

// screenshot captures the viewport as a PNG named name: into dir when set
// (envScreenshots), else into a temporary directory; either way it checks
// that the file decodes as a 1280x800 PNG.
func (tb *tab) screenshot(dir, name string) {
	tb.t.Helper()
	b, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		tb.t.Fatalf("screenshot %s: not a PNG: %v", name, err)
	}
	if sz := img.Bounds().Size(); sz.X != 1280 || sz.Y != 800 {
		tb.t.Errorf("screenshot %s: %dx%d, want 1280x800", name, sz.X, sz.Y)
	}
	pgtest.Must(tb.t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
}

// sameIDs reports whether a and b hold the same ids in the same order.
func sameIDs(a, b []int64) bool { return slices.Equal(a, b) }
