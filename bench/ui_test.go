package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

func needServer(t *testing.T) {
	t.Helper()
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
}

// TestUISeed seeds a small table and checks its shape: every state, the
// due backlog of the paused kind, retrying jobs with their errors, the
// rare kind, keyless jobs, batch items whose counters agree with them;
// and the pages' targets exist. Negative control: a batch counter
// doctored by one is caught by checkBatchCounts.
func TestUISeed(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := parseUIFlags([]string{"--jobs", "20000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, cleanup, err := openUIBench(ctx, f, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	sd, err := b.seed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := sd.shape
	t.Log(s)
	if s.Jobs != 20000 || s.Completed+s.Discarded+s.Cancelled+s.Pending != s.Jobs {
		t.Errorf("shape %+v: want 20000 jobs, each in a state", s)
	}
	frac := func(x int64) float64 { return float64(x) / float64(s.Jobs) }
	for name, c := range map[string]struct {
		got, lo, hi float64
	}{
		"completed": {frac(s.Completed), 0.85, 0.95},
		"discarded": {frac(s.Discarded), 0.01, 0.04},
		"cancelled": {frac(s.Cancelled), 0.005, 0.03},
		"pending":   {frac(s.Pending), 0.04, 0.12},
		"keyless":   {float64(s.Keyless-s.Items) / float64(s.Jobs-s.Items), 0.15, 0.25}, // items are keyless
	} {
		if c.got < c.lo || c.got > c.hi {
			t.Errorf("%s: %.3f of the jobs, want %.3f to %.3f", name, c.got, c.lo, c.hi)
		}
	}
	if s.Due == 0 || s.Retrying == 0 || s.Due+s.Retrying >= s.Pending || s.RareKind == 0 || s.Items != int64(sd.items) {
		t.Errorf("shape %+v: want due, retrying and scheduled jobs, the rare kind, and %d items", s, sd.items)
	}
	var badErrs int
	if err := b.ctl.QueryRow(ctx, `SELECT count(*) FROM `+b.tables.jobs+` WHERE
		(state = 'discarded' AND jsonb_array_length(errors) <> attempt)
		OR (state = 'pending' AND attempt > 0 AND (jsonb_array_length(errors) <> attempt OR run_at <= now()))
		OR (state = 'completed' AND finished_token IS NULL) OR (state <> 'pending' AND finished_at IS NULL)
		OR octet_length(args::text) NOT BETWEEN 100 AND 300`).Scan(&badErrs); err != nil {
		t.Fatal(err)
	}
	if badErrs != 0 {
		t.Errorf("%d jobs with errors, tokens, times or args unlike a real run's", badErrs)
	}
	if err := b.checkBatchCounts(ctx); err != nil {
		t.Fatal(err)
	}
	tg, err := b.targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tg.key == "" || tg.discarded == 0 || tg.waiting == 0 || tg.bottom == 0 {
		t.Errorf("targets %+v", tg)
	}
	// Negative control.
	if _, err := b.ctl.Exec(ctx, `UPDATE `+b.tables.counts+` SET completed = completed + 1
		WHERE (batch_id, partition) = (SELECT batch_id, partition FROM `+b.tables.counts+` LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	if err := b.checkBatchCounts(ctx); !errors.Is(err, errCheck) {
		t.Errorf("a doctored counter: got %v, want an error wrapping errCheck", err)
	}
}

func TestNextHref(t *testing.T) {
	for page, want := range map[string]string{
		`<p><a class="more" id="next" href="/jobs?group=emails&amp;before=42">Older</a>`: "/jobs?group=emails&before=42",
		`<a href="/q/jobs?before=7" rel="next" id="next">`:                               "/q/jobs?before=7",
	} {
		got, err := nextHref([]byte(page))
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", page, got, err, want)
		}
	}
	for _, page := range []string{`<a id="prev" href="/jobs">`, `<a id="nextpage" href="/x">`, `<a id="next">`} {
		if got, err := nextHref([]byte(page)); !errors.Is(err, errNoNext) {
			t.Errorf("%s: got %q, %v; want errNoNext", page, got, err)
		}
	}
}

func TestUIReport(t *testing.T) {
	msd := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	// 100 requests of 1..100 ms: p50 50, p95 95, p99 99, max 100.
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, msd(i)...)
	}
	if got := statsOf(lat); got != (latStats{n: 100, p50: 50 * time.Millisecond, p95: 95 * time.Millisecond,
		p99: 99 * time.Millisecond, max: 100 * time.Millisecond}) {
		t.Errorf("statsOf: %+v", got)
	}
	f := uiFlags{jobs: 1000, rounds: 3, requests: 100, concurrency: 1, target: 100 * time.Millisecond}
	res := []pageResult{
		{page: uiPage{name: "overview"}, rounds: []latStats{statsOf(msd(1, 2, 3)), statsOf(msd(5)), statsOf(msd(4))}},
		{page: uiPage{name: "jobs"}, rounds: []latStats{statsOf(msd(90)), statsOf(msd(120)), statsOf(msd(110))}},
	}
	r := uiReportOf(f, ServerSettings{}, uiShape{}, uiFleetStats{}, res)
	if r.WorstPage != "jobs" || r.WorstP99Ms != 110 || r.WorstRoundP99Ms != 120 || r.Pages[0].P99Ms != 4 || r.Pages[0].MaxMs != 5 {
		t.Errorf("report %+v", r)
	}
	if v := r.verdict(); !strings.Contains(v, "OVER THE TARGET: jobs.") {
		t.Errorf("verdict %q", v)
	}
	r.Pages[1].P99Ms, r.WorstP99Ms = 99, 99
	if v := r.verdict(); !strings.Contains(v, "every page is under the target") {
		t.Errorf("verdict %q", v)
	}
}

// TestUISuite runs the suite tiny against the real UI handler: every
// page of the contract answers 200 with its main element (the warm-up
// checks it), the deep pages are reached by a#next, and the report,
// JSON and document section hold every page.
func TestUISuite(t *testing.T) {
	needServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	path, doc := filepath.Join(dir, "ui.json"), filepath.Join(dir, "ui.md")
	if err := os.WriteFile(doc, []byte("# The web UI\n\n## Performance\n\nHand-written text.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runUI(ctx, []string{"--jobs", "3000", "--requests", "3", "--rounds", "2", "--warmup", "1", "--trickle", "20",
		"--concurrency", "2", "--json", path, "--doc", doc}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var rep uiReport
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Suite != "ui" || rep.Jobs != 3000 || rep.Shape.Jobs != 3000 || len(rep.Pages) != len(uiPageNames) || rep.Fleet.Workers != 5 {
		t.Fatalf("report %+v", rep)
	}
	for i, p := range rep.Pages {
		if strings.HasPrefix(p.Page, "jobs-next") && !strings.Contains(p.Path, "before=") {
			t.Errorf("page %s was not reached by a#next: %s", p.Page, p.Path)
		}
		if p.Page != uiPageNames[i] || p.Requests != 2*4 || len(p.P99RoundsMs) != 2 || p.P99Ms <= 0 || p.MaxMs < p.P99Ms || p.Bytes == 0 {
			t.Errorf("page %+v", p)
		}
	}
	b, err = os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := docMarkers("ui")
	for _, want := range []string{"Hand-written text.", begin, end, "Command: `go run . ui --jobs 3000", "| jobs-next-5 |", "Worst p99"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %q:\n%s", want, b)
		}
	}
	if !strings.Contains(out.String(), "batch-big") {
		t.Errorf("output:\n%s", out.String())
	}
}
