package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// uiMeter requests the UI's pages over HTTP and times them.
type uiMeter struct {
	f       uiFlags
	client  *http.Client
	base    string // the server's URL
	stderr  io.Writer
	elapsed time.Duration // of the timed rounds
	tracer  *stmtTracer   // times the UI's statements per page (concurrency 1)
}

// pageResult is one page's latencies, per round, and what its warm-up
// responses held.
type pageResult struct {
	page   uiPage
	rounds []latStats
	rows   int  // tr[data-job] rows (job lists)
	cut    bool // #scan-note: the page was cut short by the scan bound
	bytes  int  // body size
	stmts  []StmtShare
}

// latStats sums up one page's latencies in one round (nearest rank).
type latStats struct {
	n                  int
	p50, p95, p99, max time.Duration
}

func statsOf(lat []time.Duration) latStats {
	if len(lat) == 0 {
		return latStats{}
	}
	s := sample{lat: slices.Sorted(slices.Values(lat))}
	return latStats{n: len(lat), p50: s.quantile(0.50), p95: s.quantile(0.95), p99: s.quantile(0.99), max: s.lat[len(s.lat)-1]}
}

// get requests path and reads the whole body; d is the time from sending
// the request until the body's last byte.
func (m *uiMeter) get(ctx context.Context, path string) (body []byte, d time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	d = time.Since(t0)
	if err != nil {
		return nil, d, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, d, fmt.Errorf("GET %s: %s: %s", path, resp.Status, excerpt(body))
	}
	return body, d, nil
}

func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// follow requests path and follows its a#next up to n times, returning
// the last page's path (relative to the handler's root, as path) and how
// many links it followed (fewer than n when a page had no a#next: the
// listing ended).
func (m *uiMeter) follow(ctx context.Context, path string, n int) (string, int, error) {
	for i := range n {
		body, _, err := m.get(ctx, path)
		if err != nil {
			return "", i, err
		}
		href, err := nextHref(body)
		if errors.Is(err, errNoNext) && !hasID(body, "next") {
			return path, i, nil
		}
		if err != nil {
			return "", i, fmt.Errorf("page %d of %s: %w", i+1, path, err)
		}
		cur, err := url.Parse(m.base + path)
		if err != nil {
			return "", i, err
		}
		ref, err := url.Parse(href)
		if err != nil {
			return "", i, fmt.Errorf("a#next %q: %w", href, err)
		}
		path = cur.ResolveReference(ref).RequestURI()
	}
	return path, n, nil
}

// run warms every page up (checking that it is the page the contract
// describes), then times --rounds rounds.
func (m *uiMeter) run(ctx context.Context, pages []uiPage) ([]pageResult, error) {
	res := make([]pageResult, len(pages))
	for i, p := range pages {
		res[i].page = p
		body, _, err := m.get(ctx, p.path)
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", p.name, err)
		}
		if !hasID(body, p.marker) {
			return nil, fmt.Errorf("page %s (%s) has no element #%s: %s", p.name, p.path, p.marker, excerpt(body))
		}
		res[i].rows = len(jobRow.FindAll(body, -1))
		res[i].cut = scanNote.Match(body)
		res[i].bytes = len(body)
		for range max(m.f.warmup-1, 0) {
			if _, _, err := m.get(ctx, p.path); err != nil {
				return nil, fmt.Errorf("page %s: %w", p.name, err)
			}
		}
	}
	for r := range m.f.rounds {
		t0 := time.Now()
		lat, err := m.round(ctx, pages, r)
		m.elapsed += time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", r+1, err)
		}
		worst := ""
		var worstP99 time.Duration
		for i := range pages {
			s := statsOf(lat[i])
			res[i].rounds = append(res[i].rounds, s)
			if s.p99 > worstP99 {
				worst, worstP99 = pages[i].name, s.p99
			}
		}
		fmt.Fprintf(m.stderr, "  round %d: %d pages x %d requests in %v; worst p99 %.1f ms (%s)\n",
			r+1, len(pages), len(lat[0]), time.Since(t0).Round(100*time.Millisecond), ms(worstP99), worst)
	}
	if m.tracer != nil && m.f.concurrency == 1 {
		for i := range res {
			n := 0
			for _, s := range res[i].rounds {
				n += s.n
			}
			res[i].stmts = m.tracer.shares(pages[i].name, n)
		}
	}
	return res, nil
}

// round requests every page --requests times, from --concurrency clients;
// each client interleaves the pages request by request, from its own
// starting page, so that a disturbance on the machine falls on every page
// alike. It returns each page's latencies.
func (m *uiMeter) round(ctx context.Context, pages []uiPage, r int) ([][]time.Duration, error) {
	c := m.f.concurrency
	each := (m.f.requests + c - 1) / c
	lats := make([][][]time.Duration, c)
	errs := make([]error, c)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range c {
		lats[w] = make([][]time.Duration, len(pages))
		wg.Go(func() {
			for i := range each {
				for j := range pages {
					k := (i + j + w + r) % len(pages)
					if c == 1 && m.tracer != nil {
						m.tracer.setPage(pages[k].name)
					}
					_, d, err := m.get(ctx, pages[k].path)
					if c == 1 && m.tracer != nil {
						m.tracer.setPage("")
					}
					if err != nil {
						errs[w] = fmt.Errorf("page %s: %w", pages[k].name, err)
						cancel()
						return
					}
					lats[w][k] = append(lats[w][k], d)
				}
			}
		})
	}
	wg.Wait()
	// The first failure cancelled the other clients: report it, not
	// their cancellation.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	out := make([][]time.Duration, len(pages))
	for w := range c {
		for k := range pages {
			out[k] = append(out[k], lats[w][k]...)
		}
	}
	return out, nil
}
