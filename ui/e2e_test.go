package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// The payloads of the XSS checks: each sets window.__pwned if the page
// renders it as HTML instead of text. They close the elements they may be
// shown in first.
const (
	xssScript = `</pre></td><script>window.__pwned=1</script>`
	xssImg    = `"'><img src=x onerror="window.__pwned=1">`
)

// seeded are the jobs and batches the end-to-end tests look at.
type seeded struct {
	ok         []int64 // completed
	failed     []int64 // discarded, with an error (kind fail)
	xss        int64   // discarded, args, key and error holding the payloads
	scheduled  int64   // pending, due in an hour: cancelled through the UI
	untouched  int64   // pending, due in an hour: actions refused must leave it
	blocker    int64   // pending, due in an hour, key "held"
	waiter     int64   // pending, due, waiting behind blocker
	slow       []int64 // running until the workers stop
	reprice    queue.BatchInfo
	backfill   queue.BatchInfo // running: two of its items never finish
	okItems    int
	slowItems  int
	totalOKRun int // ok jobs and items completed
}

// seed enqueues the jobs and batches, and waits until the fleet has run
// what it can: the ok jobs completed, the failing ones discarded, the slow
// ones published as running.
func seed(t *testing.T, f *fleet) seeded {
	t.Helper()
	ctx := pgtest.Context(t)
	var s seeded
	for i := range 120 {
		s.ok = append(s.ok, f.enqueue(queue.Job{Key: fmt.Sprintf("cust-%d", i%10), Args: okJob{N: i}}))
	}
	for i := range 3 {
		s.failed = append(s.failed, f.enqueue(queue.Job{Key: fmt.Sprintf("card-%d", i), Args: failJob{Note: fmt.Sprintf("card %d expired", i)}, MaxAttempts: 1}))
	}
	s.xss = f.enqueue(queue.Job{Key: xssScript, Args: failJob{Note: xssScript + xssImg}, MaxAttempts: 1})
	s.failed = append(s.failed, s.xss)
	later := time.Now().Add(time.Hour)
	s.scheduled = f.enqueue(queue.Job{Key: "sched-1", Args: okJob{N: 1}, RunAt: later})
	s.untouched = f.enqueue(queue.Job{Key: "sched-2", Args: okJob{N: 2}, RunAt: later})
	s.blocker = f.enqueue(queue.Job{Key: "held", Args: okJob{N: 3}, RunAt: later})
	s.waiter = f.enqueue(queue.Job{Key: "held", Args: okJob{N: 4}})
	for i := range 3 {
		s.slow = append(s.slow, f.enqueue(queue.Job{Args: slowJob{N: i}}))
	}

	batch := func(name string, items []queue.Item) queue.BatchInfo {
		_, err := f.client.CreateBatch(ctx, queue.BatchSpec{Group: e2eGroup, Name: name, Description: "e2e " + name})
		pgtest.Must(t, err)
		_, err = f.client.AddItems(ctx, e2eGroup, name, items...)
		pgtest.Must(t, err)
		b, err := f.client.SealBatch(ctx, e2eGroup, name)
		pgtest.Must(t, err)
		return b
	}
	var items []queue.Item
	for i := range 10 {
		items = append(items, queue.Item{ID: fmt.Sprintf("sku-%d", i), Args: okJob{N: 100 + i}})
	}
	s.reprice = batch("reprice", items)
	items = nil
	for i := range 6 {
		items = append(items, queue.Item{ID: fmt.Sprintf("row-%d", i), Args: okJob{N: 200 + i}})
	}
	for i := range 2 {
		items = append(items, queue.Item{ID: fmt.Sprintf("slow-row-%d", i), Args: slowJob{N: 10 + i}})
	}
	s.backfill = batch("backfill", items)
	s.okItems, s.slowItems = 16, 2
	s.totalOKRun = len(s.ok) + s.okItems

	f.waitFor("the ok jobs to complete and the failing ones to be discarded", func() bool {
		return f.count(`SELECT count(*) FROM leasehold.jobs WHERE kind = 'ok' AND state = 'completed'`) == s.totalOKRun &&
			f.count(`SELECT count(*) FROM leasehold.jobs WHERE state = 'discarded'`) == len(s.failed)
	})
	f.waitFor("the slow jobs to be published as running", func() bool {
		r, err := f.client.Running(ctx, e2eGroup)
		pgtest.Must(t, err)
		return len(r) == len(s.slow)+s.slowItems
	})
	var err error
	s.reprice, err = f.client.BatchByID(ctx, s.reprice.ID)
	pgtest.Must(t, err)
	s.backfill, err = f.client.BatchByID(ctx, s.backfill.ID)
	pgtest.Must(t, err)
	return s
}

// TestBrowser runs the UI in headless Chromium against a live fleet of
// three workers: it loads every page and checks the contract's elements
// against the database, watches a page update itself, clicks the actions
// and sees their effect, tries XSS payloads, checks that the read-only UI
// offers and accepts no action, and takes the screenshots of docs/ui.md.
// The browser's console must stay free of errors throughout.
func TestBrowser(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t) // before the fleet: skips without a browser
	f := newFleet(t)
	s := seed(t, f)
	srv := newServers(t, f.db)
	rw, ro := srv.rw.URL, srv.ro.URL

	t.Run("overview", func(t *testing.T) { testOverview(t, f, s, newTab(t, browser), rw) })
	t.Run("group", func(t *testing.T) { testGroupMap(t, f, s, newTab(t, browser), rw) })
	t.Run("jobs", func(t *testing.T) { testJobsList(t, f, s, newTab(t, browser), rw) })
	t.Run("job", func(t *testing.T) { testJobDetail(t, f, s, newTab(t, browser), rw) })
	t.Run("batches", func(t *testing.T) { testBatches(t, f, s, newTab(t, browser), rw) })
	t.Run("xss", func(t *testing.T) { testXSS(t, s, browser, rw) })
	t.Run("read-only", func(t *testing.T) { testReadOnly(t, f, s, newTab(t, browser), ro, rw) })
	t.Run("screenshots", func(t *testing.T) { testScreenshots(t, s, newTab(t, browser), rw) })
	t.Run("live", func(t *testing.T) { testLive(t, f, newTab(t, browser), rw) })
	t.Run("retry", func(t *testing.T) { testRetry(t, f, s, newTab(t, browser), rw) })
	t.Run("cancel", func(t *testing.T) { testCancel(t, f, s, newTab(t, browser), rw) })
	t.Run("pause-resume", func(t *testing.T) { testPauseResume(t, f, newTab(t, browser), rw) })
	t.Run("cancel-batch", func(t *testing.T) { testCancelBatch(t, f, s, newTab(t, browser), rw) })
}

func testOverview(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	tb.open(base + "/")
	for _, g := range []string{e2eGroup, orphanGroup} {
		if n := tb.count(fmt.Sprintf(`table#groups tr[data-group=%q]`, g)); n != 1 {
			t.Errorf("table#groups: %d rows for group %s, want 1", n, g)
		}
	}
	if n := tb.count(`table#groups tr[data-group]`); n != 2 {
		t.Errorf("table#groups: %d group rows, want 2", n)
	}
	if tb.count("#throughput") != 1 {
		t.Errorf("no #throughput")
	}
	// The console check's negative control: an error and an uncaught
	// exception in the page are recorded (and would fail the subtest).
	eval[chromedp.Void](tb, `console.error("e2e control: console")`)
	eval[chromedp.Void](tb, `setTimeout(() => { throw new Error("e2e control: exception") }, 0)`)
	tb.expectProblem("e2e control: console")
	tb.expectProblem("e2e control: exception")

	// Throughput: the fleet's runs, recorded by its workers every second;
	// the page shows them once recorded (it updates itself).
	tb.wait("the completed and failed runs in #throughput", fmt.Sprintf(`(m => m && +m[1] >= %d && +m[2] >= %d)(
		(document.querySelector('#throughput figure[data-group="shop"] figcaption')?.textContent ?? "").match(/(\d+) completed, (\d+) failed/))`,
		s.totalOKRun, len(s.failed)))

	members := strings.Join(tb.texts("table#members tr"), "\n")
	for _, id := range []string{"w1", "w2", "w3"} {
		if !strings.Contains(members, id) {
			t.Errorf("table#members lacks live worker %s:\n%s", id, members)
		}
	}
}

// partitionRow is a row of the ownership map.
type partitionRow struct {
	Partition string `json:"partition"`
	Owner     string `json:"owner"`
	Token     string `json:"token"`
	Expires   string `json:"expires"`
	Running   string `json:"running"`
	Backlog   string `json:"backlog"`
	Lag       string `json:"lag"`
	Alert     bool   `json:"alert"`
}

func (tb *tab) partitionRows() []partitionRow {
	tb.t.Helper()
	return eval[[]partitionRow](tb, `Array.from(document.querySelectorAll("table#partitions tr[data-partition]"), r => {
		const c = s => (r.querySelector("td." + s)?.textContent ?? "").trim();
		return {partition: r.dataset.partition, owner: c("owner"), token: c("token"), expires: c("expires"),
			running: c("running"), backlog: c("backlog"), lag: c("lag"), alert: r.classList.contains("alert")};
	})`)
}

// leases returns each partition's lease owner (its member id) and token,
// as the database has them.
func (f *fleet) leases(group string) map[string][2]string {
	f.t.Helper()
	rows, err := f.pool.Query(pgtest.Context(f.t), `SELECT split_part(name, '/', 3), split_part(owner, '#', 1), token::text
		FROM leasehold.leases WHERE name LIKE 'partition/' || $1 || '/%' AND expires_at > now()`, group)
	pgtest.Must(f.t, err)
	defer rows.Close()
	out := map[string][2]string{}
	for rows.Next() {
		var p, owner, token string
		pgtest.Must(f.t, rows.Scan(&p, &owner, &token))
		out[p] = [2]string{owner, token}
	}
	pgtest.Must(f.t, rows.Err())
	return out
}

func testGroupMap(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	// The page against the leases: read both again until they agree, for
	// the fleet may still be handing partitions over after its start.
	var diffs []string
	for start := time.Now(); ; {
		tb.open(base + "/groups/" + e2eGroup)
		rows, leases := tb.partitionRows(), f.leases(e2eGroup)
		if len(rows) != e2ePartitions {
			t.Fatalf("table#partitions: %d rows, want %d", len(rows), e2ePartitions)
		}
		diffs = nil
		for i, r := range rows {
			if r.Partition != strconv.Itoa(i) {
				t.Fatalf("row %d is partition %q", i, r.Partition)
			}
			if r.Expires == "" {
				t.Errorf("partition %s: no expiry shown", r.Partition)
			}
			l := leases[r.Partition]
			if !slices.Contains([]string{"w1", "w2", "w3"}, l[0]) || !strings.Contains(r.Owner, l[0]) || r.Token != l[1] {
				diffs = append(diffs, fmt.Sprintf("partition %s: owner %q, token %q; the database says %q, %q", r.Partition, r.Owner, r.Token, l[0], l[1]))
			}
		}
		if len(diffs) == 0 || time.Since(start) > e2eWait {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range diffs {
		t.Error(d)
	}
	// The slow jobs run for good (one handed over is cancelled, and runs
	// again on the new owner), published at most a second late: the page,
	// updating itself, shows them all.
	tb.wait("the running jobs in td.running", fmt.Sprintf(`Array.from(document.querySelectorAll("table#partitions td.running"),
		c => parseInt(c.textContent.trim()) || 0).reduce((a, b) => a + b, 0) === %d`, len(s.slow)+s.slowItems))
	if n := tb.count(`#events li[data-event-kind="handoff"]`); n == 0 {
		t.Errorf("#events lists no handoff: three workers joined one after the other")
	}

	// Negative control for the alert class: a group whose partitions no
	// member owns has every row in alert.
	tb.open(base + "/groups/" + orphanGroup)
	rows := tb.partitionRows()
	if len(rows) != orphanParts {
		t.Fatalf("group %s: %d rows, want %d", orphanGroup, len(rows), orphanParts)
	}
	for _, r := range rows {
		if !r.Alert {
			t.Errorf("unowned partition %s of %s is not in alert: %+v", r.Partition, orphanGroup, r)
		}
	}
}

func testJobsList(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	list := func(q url.Values) []int64 {
		t.Helper()
		q.Set("group", e2eGroup)
		tb.open(base + "/jobs?" + q.Encode())
		if tb.count("form#filters") != 1 {
			t.Errorf("jobs?%s: no form#filters", q.Encode())
		}
		return tb.jobIDs()
	}
	// check compares the listed page with queue.List's, which the page
	// must equal, or start when the page has a next link. Both are read
	// again until they agree (a running job handed over runs again).
	check := func(name string, q url.Values, flt queue.Filter) {
		t.Helper()
		for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
			got, want := list(q), f.ids(flt)
			if len(want) == 0 {
				t.Fatalf("%s: the database has no such job: the check would prove nothing", name)
			}
			if tb.count("a#next") == 1 {
				want = want[:min(len(got), len(want))]
			}
			if sameIDs(got, want) {
				return
			}
			if time.Since(start) > e2eWait {
				t.Errorf("%s (jobs?%s): listed %v\nwant %v", name, q.Encode(), got, want)
				return
			}
		}
	}
	check("state", url.Values{"state": {"discarded"}}, queue.Filter{State: queue.StateDiscarded})
	check("kind", url.Values{"kind": {"fail"}}, queue.Filter{Kind: "fail"})
	check("key", url.Values{"key": {"cust-3"}}, queue.Filter{Key: "cust-3"})
	p := f.info(s.ok[0]).Partition
	check("partition", url.Values{"partition": {strconv.Itoa(p)}}, queue.Filter{Partitions: []int{p}})
	check("batch", url.Values{"batch": {strconv.FormatInt(s.backfill.ID, 10)}}, queue.Filter{Batch: s.backfill.ID})
	check("running", url.Values{"state": {"running"}}, queue.Filter{State: queue.StateRunning})
	check("state and kind", url.Values{"state": {"completed"}, "kind": {"ok"}}, queue.Filter{State: queue.StateCompleted, Kind: "ok"})

	// Paging: every job once, newest first, across the next links.
	all := f.ids(queue.Filter{})
	var seen []int64
	tb.open(base + "/jobs?group=" + e2eGroup)
	for pages := 1; ; pages++ {
		ids := tb.jobIDs()
		if len(ids) == 0 {
			t.Fatalf("page %d is empty", pages)
		}
		seen = append(seen, ids...)
		if tb.count("a#next") == 0 {
			break
		}
		href := tb.attrs("a#next", "href")[0]
		if !strings.Contains(href, "before=") {
			t.Fatalf("a#next href %q carries no before=", href)
		}
		if pages > len(all) {
			t.Fatalf("more pages than jobs")
		}
		tb.click("a#next")
	}
	if !sameIDs(seen, all) {
		t.Errorf("paging listed %d jobs, want the %d jobs newest first", len(seen), len(all))
	}
	if len(seen) == len(tb.jobIDs()) {
		t.Errorf("one page held all %d jobs: paging was not exercised", len(seen))
	}
}

func testJobDetail(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	job := func(id int64) {
		t.Helper()
		tb.open(fmt.Sprintf("%s/jobs/%d", base, id))
	}
	// A discarded job: its state, args, error timeline and finishing token.
	id := s.failed[0]
	j := f.info(id)
	job(id)
	if got := tb.text("#job-state"); got != "discarded" {
		t.Errorf("job %d: #job-state %q, want discarded", id, got)
	}
	if got := tb.text("pre#job-args"); !strings.Contains(got, "card 0 expired") {
		t.Errorf("job %d: pre#job-args %q lacks its note", id, got)
	}
	errs := tb.texts("ol#job-errors li")
	if len(errs) == 0 || len(errs) != len(j.Errors) || !strings.Contains(errs[0], "charge declined: card 0 expired") {
		t.Errorf("job %d: ol#job-errors %q; the database has %d errors", id, errs, len(j.Errors))
	}
	if j.FinishedToken == nil || tb.text("#job-token") != fmt.Sprint(int64(*j.FinishedToken)) {
		t.Errorf("job %d: #job-token %q, finished by token %v", id, tb.text("#job-token"), j.FinishedToken)
	}
	// A completed job: the token that finished it.
	j = f.info(s.ok[0])
	job(s.ok[0])
	if got := tb.text("#job-state"); got != "completed" {
		t.Errorf("job %d: #job-state %q, want completed", s.ok[0], got)
	}
	if j.FinishedToken == nil || tb.text("#job-token") != fmt.Sprint(int64(*j.FinishedToken)) {
		t.Errorf("job %d: #job-token %q, finished by token %v", s.ok[0], tb.text("#job-token"), j.FinishedToken)
	}
	if n := tb.count("ol#job-errors li"); n != 0 {
		t.Errorf("job %d completed at once: %d errors listed", s.ok[0], n)
	}
	// A job waiting behind another of its key links to it.
	job(s.waiter)
	hrefs := tb.attrs("#waiting-behind a", "href")
	if len(hrefs) != 1 || !strings.HasSuffix(hrefs[0], fmt.Sprintf("/jobs/%d", s.blocker)) {
		t.Errorf("job %d waits behind job %d: #waiting-behind a %q", s.waiter, s.blocker, hrefs)
	} else {
		tb.click("#waiting-behind a")
		if got := eval[string](tb, `location.pathname`); got != fmt.Sprintf("/jobs/%d", s.blocker) {
			t.Errorf("following #waiting-behind led to %s", got)
		}
	}
	job(s.blocker)
	if n := tb.count("#waiting-behind a"); n != 0 {
		t.Errorf("job %d waits behind nothing, yet has #waiting-behind a", s.blocker)
	}
	if got := tb.text("#job-state"); got != "pending" {
		t.Errorf("job %d: #job-state %q, want pending", s.blocker, got)
	}
	// A running job.
	job(s.slow[0])
	if got := tb.text("#job-state"); got != "running" {
		t.Errorf("job %d: #job-state %q, want running", s.slow[0], got)
	}
}

func testBatches(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	tb.open(base + "/batches?group=" + e2eGroup)
	for _, b := range []queue.BatchInfo{s.reprice, s.backfill} {
		row := fmt.Sprintf(`table#batches tr[data-batch="%d"]`, b.ID)
		if tb.count(row) != 1 {
			t.Errorf("no row %s", row)
			continue
		}
		if tb.count(row+" progress") != 1 {
			t.Errorf("%s: no progress element", row)
		}
		if got := tb.text(row); !strings.Contains(got, b.Name) {
			t.Errorf("%s: %q lacks the name %s", row, got, b.Name)
		}
	}
	for _, b := range []queue.BatchInfo{s.reprice, s.backfill} {
		tb.open(fmt.Sprintf("%s/batches/%d", base, b.ID))
		if got := tb.text("#batch-state"); got != string(b.State()) {
			t.Errorf("batch %s: #batch-state %q, want %q", b.Name, got, b.State())
		}
		v := eval[[2]float64](tb, `(p => [p.value, p.max])(document.querySelector("progress#batch-progress"))`)
		done := float64(b.Total - b.Pending)
		if v[1] <= 0 || v[0]/v[1] != done/float64(b.Total) {
			t.Errorf("batch %s: progress %v/%v, want %v/%d", b.Name, v[0], v[1], done, b.Total)
		}
	}
}

// testXSS loads pages showing a job whose args, key and error hold
// payloads, and checks that none ran, also after live updates (which
// replace parts of the page). Its negative control loads the same payloads
// unescaped, and must see them run: the probe can see an injection.
func testXSS(t *testing.T, s seeded, browser context.Context, base string) {
	pages := []string{
		fmt.Sprintf("/jobs/%d", s.xss),
		"/jobs?group=" + e2eGroup,
		"/jobs?group=" + e2eGroup + "&state=discarded",
		"/jobs?" + url.Values{"group": {e2eGroup}, "key": {xssScript}}.Encode(),
		"/jobs?" + url.Values{"group": {e2eGroup}, "kind": {xssImg}}.Encode(),
	}
	tb := newTab(t, browser)
	for _, p := range pages {
		tb.open(base + p)
		tb.waitUpdates(tb.updated(), 2)
		if pwned := eval[string](tb, `typeof window.__pwned`); pwned != "undefined" {
			t.Errorf("%s: a payload ran (window.__pwned is %s)", p, pwned)
		}
	}
	tb.open(base + fmt.Sprintf("/jobs/%d", s.xss))
	if got := tb.text("pre#job-args"); !strings.Contains(got, "<script>window.__pwned=1</script>") || !strings.Contains(got, "onerror=") {
		t.Errorf("pre#job-args %q does not show the payloads as text", got)
	}
	if got := strings.Join(tb.texts("ol#job-errors li"), "\n"); !strings.Contains(got, "<script>") {
		t.Errorf("ol#job-errors %q does not show the payload as text", got)
	}

	// The negative control.
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><body><table><tr><td><pre>%s</pre></td></tr></table></body></html>", r.URL.Query().Get("p"))
	}))
	defer raw.Close()
	tb.allow("Failed to load resource") // the img's src=x
	for _, p := range []string{xssScript, xssImg} {
		tb.open(raw.URL + "/?" + url.Values{"p": {p}}.Encode())
		tb.wait("the unescaped payload "+p+" to run (negative control)", `window.__pwned === 1`)
	}
}

// testReadOnly checks that the read-only UI renders no form that posts
// and no action button, and refuses an action posted from its page.
func testReadOnly(t *testing.T, f *fleet, s seeded, tb *tab, ro, rw string) {
	pages := []string{"/", "/groups/" + e2eGroup, "/jobs?group=" + e2eGroup,
		fmt.Sprintf("/jobs/%d", s.failed[1]), fmt.Sprintf("/jobs/%d", s.untouched),
		"/batches?group=" + e2eGroup, fmt.Sprintf("/batches/%d", s.backfill.ID)}
	const actionSel = `form[method=post i], #retry, #cancel, #pause, #resume, button.resume, #cancel-batch, ` +
		`#retry-form, #cancel-form, #pause-form, #cancel-batch-form, input[name=csrf]`
	for _, p := range pages {
		tb.open(ro + p)
		if n := tb.count(actionSel); n != 0 {
			t.Errorf("read-only %s: %d action elements (%s)", p, n, strings.Join(tb.attrs(actionSel, "id"), " "))
		}
	}
	// The same pages with actions do offer them: the selector finds them.
	tb.open(rw + fmt.Sprintf("/jobs/%d", s.failed[1]))
	if tb.count("#retry") != 1 {
		t.Errorf("the UI with actions offers no #retry on a discarded job: the read-only check proves nothing")
	}

	// Posts built in the page: refused by the read-only server; and by
	// the other without the CSRF token. Either way the job stays pending.
	tb.allow("Failed to load resource")
	post := func(action string, id int64) int {
		return evalAsync[int](tb, fmt.Sprintf(`fetch(%s, {method: "POST", body: new URLSearchParams({id: "%d", return: "/"}), redirect: "manual"}).then(r => r.status)`,
			js("/actions/"+action), id))
	}
	tb.open(ro + "/")
	for _, a := range []string{"cancel", "retry"} {
		if code := post(a, s.untouched); code != 404 && code != 403 {
			t.Errorf("read-only POST /actions/%s: status %d, want 404 or 403", a, code)
		}
	}
	tb.open(rw + "/")
	if code := post("cancel", s.untouched); code != 403 {
		t.Errorf("POST /actions/cancel without the CSRF token: status %d, want 403", code)
	}
	if code := evalAsync[int](tb, `fetch("/actions/cancel?id=1").then(r => r.status)`); code != 405 {
		t.Errorf("GET /actions/cancel: status %d, want 405", code)
	}
	if st := f.info(s.untouched).State; st != queue.StatePending {
		t.Errorf("job %d is %s after refused actions, want pending", s.untouched, st)
	}
}

// testScreenshots saves the pages' screenshots: into $LEASEHOLD_UI_SCREENSHOTS
// (docs/img, for docs/ui.md) when set, else into a temporary directory.
func testScreenshots(t *testing.T, s seeded, tb *tab, base string) {
	dir := os.Getenv(envScreenshots)
	if dir == "" {
		dir = t.TempDir()
	}
	pgtest.Must(t, os.MkdirAll(dir, 0o755))
	for _, p := range []struct{ name, path string }{
		{"ui-overview.png", "/"},
		{"ui-group.png", "/groups/" + e2eGroup},
		{"ui-jobs.png", "/jobs?group=" + e2eGroup},
		{"ui-job.png", fmt.Sprintf("/jobs/%d", s.failed[0])},
		{"ui-batches.png", "/batches?group=" + e2eGroup},
		{"ui-batch.png", fmt.Sprintf("/batches/%d", s.backfill.ID)},
	} {
		tb.open(base + p.path)
		tb.screenshot(dir, p.name)
	}
}

// testLive opens the ownership map, starts a fourth worker behind the
// page's back, and waits for the page, updating itself without a reload,
// to show it owning partitions.
func testLive(t *testing.T, f *fleet, tb *tab, base string) {
	tb.open(base + "/groups/" + e2eGroup)
	if n := tb.count(`table#partitions td.owner`); n != e2ePartitions {
		t.Fatalf("%d owner cells", n)
	}
	if strings.Contains(strings.Join(tb.texts("table#partitions td.owner"), " "), "w4") {
		t.Fatalf("w4 owns partitions before it started")
	}
	eval[bool](tb, `window.__sameDocument = true`)
	from := tb.updated()
	f.start("w4")
	f.waitBalanced("w1", "w2", "w3", "w4")
	tb.wait("w4 in td.owner", `Array.from(document.querySelectorAll("table#partitions td.owner")).some(c => c.textContent.includes("w4"))`)
	if tb.updated() <= from {
		t.Errorf("the page changed without a live update")
	}
	if !eval[bool](tb, `window.__sameDocument === true`) {
		t.Errorf("the page reloaded instead of updating itself")
	}
}

func testRetry(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	id := s.failed[2]
	before := f.info(id)
	tb.open(fmt.Sprintf("%s/jobs/%d", base, id))
	if got := tb.text("#job-state"); got != "discarded" {
		t.Fatalf("job %d: #job-state %q before the retry", id, got)
	}
	if code := tb.click("#retry"); code != 200 {
		t.Fatalf("retry: status %d", code)
	}
	if tb.count("#flash") != 1 {
		t.Errorf("no #flash after the retry")
	}
	// The job left discarded (it is pending, or ran and failed again: then
	// it has one more error).
	f.waitFor("the retried job to be pending or to have run again", func() bool {
		j := f.info(id)
		return j.State != queue.StateDiscarded || len(j.Errors) > len(before.Errors)
	})
	if got := eval[string](tb, `location.pathname`); got != fmt.Sprintf("/jobs/%d", id) {
		t.Errorf("the retry returned to %s", got)
	}
	tb.open(fmt.Sprintf("%s/jobs/%d", base, id))
	tb.wait("#job-errors to show the new attempt, or #job-state to leave discarded", fmt.Sprintf(
		`document.querySelector("#job-state").textContent.trim() !== "discarded" || document.querySelectorAll("ol#job-errors li").length > %d`,
		len(before.Errors)))
}

func testCancel(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	id := s.scheduled
	tb.open(fmt.Sprintf("%s/jobs/%d", base, id))
	if got := tb.text("#job-state"); got != "pending" {
		t.Fatalf("job %d: #job-state %q before the cancel", id, got)
	}
	if tb.count("#retry") != 0 {
		t.Errorf("a pending job offers #retry")
	}
	tb.click("#cancel")
	if got := tb.text("#job-state"); got != "cancelled" {
		t.Errorf("job %d: #job-state %q after the cancel", id, got)
	}
	if tb.count("#flash") != 1 {
		t.Errorf("no #flash after the cancel")
	}
	if st := f.info(id).State; st != queue.StateCancelled {
		t.Errorf("job %d is %s in the database", id, st)
	}
	if tb.count("#retry") != 1 || tb.count("#cancel") != 0 {
		t.Errorf("a cancelled job offers #retry %d times, #cancel %d times; want 1, 0", tb.count("#retry"), tb.count("#cancel"))
	}
}

func testPauseResume(t *testing.T, f *fleet, tb *tab, base string) {
	ctx := pgtest.Context(t)
	const reason = `e2e: deploy <b>now</b>`
	tb.open(base + "/groups/" + e2eGroup)
	eval[bool](tb, fmt.Sprintf(`(f => { f.elements.kind.value = "ok"; f.elements.reason.value = %s; return true })(document.querySelector("form#pause-form"))`, js(reason)))
	tb.click("#pause")
	if tb.count("#flash") != 1 {
		t.Errorf("no #flash after the pause")
	}
	ps, err := f.client.Paused(ctx, e2eGroup)
	pgtest.Must(t, err)
	if len(ps) != 1 || ps[0].Kind != "ok" || ps[0].Reason != reason {
		t.Fatalf("paused: %+v", ps)
	}
	if got := tb.text("#pauses"); !strings.Contains(got, reason) {
		t.Errorf("#pauses %q lacks the reason", got)
	}
	tb.click("#pauses button.resume")
	ps, err = f.client.Paused(ctx, e2eGroup)
	pgtest.Must(t, err)
	if len(ps) != 0 {
		t.Errorf("still paused after the resume: %+v", ps)
	}
	if got := tb.text("#pauses"); strings.Contains(got, reason) {
		t.Errorf("#pauses %q still shows the pause", got)
	}

	// The whole group, resumed by #resume.
	eval[bool](tb, `(f => { f.elements.kind.value = ""; f.elements.reason.value = "e2e: whole group"; return true })(document.querySelector("form#pause-form"))`)
	tb.click("#pause")
	ps, err = f.client.Paused(ctx, e2eGroup)
	pgtest.Must(t, err)
	if len(ps) != 1 || ps[0].Kind != "" {
		t.Fatalf("paused: %+v; want the whole group", ps)
	}
	if tb.count("#pauses #resume") != 1 {
		t.Fatalf("no #resume for the whole group's pause")
	}
	tb.click("#pauses #resume")
	ps, err = f.client.Paused(ctx, e2eGroup)
	pgtest.Must(t, err)
	if len(ps) != 0 {
		t.Errorf("still paused after #resume: %+v", ps)
	}
}

func testCancelBatch(t *testing.T, f *fleet, s seeded, tb *tab, base string) {
	tb.open(fmt.Sprintf("%s/batches/%d", base, s.backfill.ID))
	if got := tb.text("#batch-state"); got != string(queue.BatchRunning) {
		t.Fatalf("#batch-state %q before the cancel", got)
	}
	tb.click("#cancel-batch")
	if got := tb.text("#batch-state"); got != string(queue.BatchCancelled) {
		t.Errorf("#batch-state %q after the cancel", got)
	}
	b, err := f.client.BatchByID(pgtest.Context(t), s.backfill.ID)
	pgtest.Must(t, err)
	if b.State() != queue.BatchCancelled {
		t.Errorf("the batch is %s in the database", b.State())
	}
	if tb.count("#cancel-batch") != 0 {
		t.Errorf("a cancelled batch offers #cancel-batch")
	}
}
