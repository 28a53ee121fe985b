package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/queue"
)

func TestSummarizeLat(t *testing.T) {
	ms := time.Millisecond
	// 100 reads: 1..100 ms, shuffled; nearest rank: p50 = 50, p99 = 99.
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*ms)
	}
	in := slices.Clone(lat)
	got := summarizeLat(lat)
	if got != (latSummary{n: 100, p50: 50 * ms, p99: 99 * ms, max: 100 * ms}) {
		t.Errorf("summary %+v", got)
	}
	if !slices.Equal(lat, in) {
		t.Error("summarizeLat reordered its input")
	}
	if got := summarizeLat([]time.Duration{7 * ms}); got != (latSummary{n: 1, p50: 7 * ms, p99: 7 * ms, max: 7 * ms}) {
		t.Errorf("one read: %+v", got)
	}
	if got := summarizeLat(nil); got != (latSummary{}) {
		t.Errorf("no reads: %+v", got)
	}
}

func TestRatios(t *testing.T) {
	// Paired by round; a round whose denominator is 0 is left out.
	got := ratios([]float64{8, 9, 5, 1}, []float64{10, 9, 0, 2})
	if !slices.Equal(got, []float64{0.8, 1, 0.5}) {
		t.Errorf("ratios %v, want [0.8 1 0.5]", got)
	}
	if got := ratios([]float64{1, 2}, []float64{1}); !slices.Equal(got, []float64{1}) {
		t.Errorf("uneven: %v", got)
	}
}

func TestBestChunk(t *testing.T) {
	rates := map[int][]float64{250: {90, 100, 80}, 1000: {100, 110, 120}, 4000: {130, 90, 132}}
	best, over, ok := bestChunk(rates, 1000)
	if !ok || best != 4000 || over != 130.0/110 {
		t.Errorf("best %d over %v ok %v; want 4000, 130/110", best, over, ok)
	}
	// The default fastest: over is 1.
	rates[4000] = []float64{1, 2, 3}
	if best, over, ok := bestChunk(rates, 1000); !ok || best != 1000 || over != 1 {
		t.Errorf("best %d over %v ok %v; want 1000, 1", best, over, ok)
	}
	if _, _, ok := bestChunk(map[int][]float64{250: {1}}, 1000); ok {
		t.Error("no default measured, yet ok")
	}
}

func TestCheckProgress(t *testing.T) {
	at := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	later := at.Add(time.Second)
	read := func(completed int64, finished *time.Time) queue.BatchInfo {
		return queue.BatchInfo{Total: 10, Completed: completed, Pending: 10 - completed, FinishedAt: finished}
	}
	good := []queue.BatchInfo{read(0, nil), read(4, nil), read(4, nil), read(10, nil), read(10, &at), read(10, &at)}
	if err := checkProgress(good, 10); err != nil {
		t.Fatalf("a good history: %v", err)
	}
	// Negative controls: each breaks one invariant, and is caught.
	back := read(3, nil)
	badSum := read(5, nil)
	badSum.Pending = 4
	failed := read(5, nil)
	failed.Failed, failed.Pending = 1, 4
	early := read(9, &at)
	for name, h := range map[string][]queue.BatchInfo{
		"completed goes back":        {read(4, nil), back},
		"counts do not add up":       {badSum},
		"a no-op item failed":        {failed},
		"finished with items left":   {early},
		"finished then not finished": {read(10, &at), read(10, nil)},
		"finished twice":             {read(10, &at), read(10, &later)},
		"another total":              {{Total: 11, Pending: 11}},
	} {
		if err := checkProgress(append(slices.Clone(good[:1]), h...), 10); !errors.Is(err, errProgress) {
			t.Errorf("%s: got %v, want an error wrapping errProgress", name, err)
		}
	}
}

func TestCheckBatchTally(t *testing.T) {
	if err := checkBatchTally(batchTally{total: 5, firstTry: 5}, 5, false); err != nil {
		t.Errorf("plain: %v", err)
	}
	if err := checkBatchTally(batchTally{total: 6, firstTry: 6, items: 5, followUps: 1}, 5, true); err != nil {
		t.Errorf("batch: %v", err)
	}
	// Negative controls.
	for name, c := range map[string]struct {
		t     batchTally
		batch bool
	}{
		"plain: a job ran twice":   {batchTally{total: 5, firstTry: 4}, false},
		"plain: a job missing":     {batchTally{total: 4, firstTry: 4}, false},
		"batch: follow-up twice":   {batchTally{total: 7, firstTry: 7, items: 5, followUps: 2}, true},
		"batch: no follow-up":      {batchTally{total: 5, firstTry: 5, items: 5}, true},
		"batch: an item ran twice": {batchTally{total: 6, firstTry: 5, items: 5, followUps: 1}, true},
	} {
		if err := checkBatchTally(c.t, 5, c.batch); !errors.Is(err, errCheck) {
			t.Errorf("%s: got %v, want an error wrapping errCheck", name, err)
		}
	}
}

// TestBatchSuite runs the batch suite tiny on a real server (two rounds,
// so both orders, and a sweep) and checks the Markdown tables, the JSON
// report and the document section. Each burn-down checks in the database
// that every job and item completed once, on its first attempt, the
// follow-up was enqueued once, and the progress reads kept their
// invariants.
func TestBatchSuite(t *testing.T) {
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	path, doc := filepath.Join(dir, "batch.json"), filepath.Join(dir, "b.md")
	if err := os.WriteFile(doc, []byte("# Benchmarks\n\nHand-written text.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := runBatch(ctx, []string{"--items", "400", "--rounds", "2", "--sweep-items", "300", "--sweep-rounds", "1",
		"--chunks", "100,1000", "--partitions", "2", "--keys", "50", "--read-every", "5ms",
		"--markdown", "--json", path, "--doc", doc}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine: nproc", "batch: 400 items, 2 round(s)", "r1 plain, batch; r2 batch, plain",
		"| burn-down: batch / plain (paired per round) |", "| progress read: max, ms |", "| control read: max, ms |",
		"SubmitItems by SubmitChunk: 300 items", "| 100 |", "| 1000 |", "Fastest by median: SubmitChunk"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Markdown output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Suite  string
		Items  int
		Rounds int
		Values map[string]struct {
			Spread Spread
			Rounds []float64
		}
		Sweep  []batchSweepRow
		Server ServerSettings
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Suite != "batch" || rep.Items != 400 || rep.Rounds != 2 || len(rep.Sweep) != 2 || rep.Server.Fsync == "" {
		t.Errorf("report %+v", rep)
	}
	for _, name := range []string{"burn-down: plain jobs, items/s", "burn-down: batch items (SealedAt to FinishedAt), items/s",
		"submit: SubmitItems (SubmitChunk 1000), items/s", "submit: producer allocated, bytes/item"} {
		v, ok := rep.Values[name]
		if !ok || len(v.Rounds) != 2 || v.Spread.Min <= 0 {
			t.Errorf("%s: %+v (present %v)", name, v, ok)
		}
	}
	b, err = os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := docMarkers("batch")
	for _, want := range []string{"Hand-written text.", begin, end, "Command: `go run . batch --items 400", "| submit: producer peak heap in use, MiB |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("document lacks %q:\n%s", want, b)
		}
	}
}
