package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
	"github.com/leasehold/leasehold/partition"
)

func TestFairBKey(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 16, 64, 256, 1024} {
		k := fairBKey(n)
		if partition.OfString(k, n) != partition.OfString(fairKeyA, n) {
			t.Errorf("%d partitions: B's key %q in partition %d, A's in %d", n, k, partition.OfString(k, n),
				partition.OfString(fairKeyA, n))
		}
		if k == fairKeyA || !strings.HasPrefix(k, fairKeyB) {
			t.Errorf("%d partitions: B's key %q", n, k)
		}
		if k2 := fairBKey(n); k2 != k {
			t.Errorf("%d partitions: %q then %q", n, k, k2)
		}
	}
	// One partition: every key is in it, so B's key is the plain one.
	if k := fairBKey(1); k != fairKeyB {
		t.Errorf("1 partition: %q, want %q", k, fairKeyB)
	}
}

func TestFairWaits(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cut := at(1000)
	// Job 0 waited 5ms, job 1 30ms, job 2 never started (counts until the
	// cut), job 3 was never enqueued (left out).
	enq := []time.Time{at(100), at(200), at(300), {}}
	start := []time.Time{at(105), at(230), {}, {}}
	lat, short := fairWaits(enq, start, cut)
	if want := []time.Duration{5 * time.Millisecond, 30 * time.Millisecond, 700 * time.Millisecond}; !slices.Equal(lat, want) || !short {
		t.Errorf("waits %v short %v, want %v short", lat, short, want)
	}
	lat, short = fairWaits(enq[:2], start[:2], cut)
	if len(lat) != 2 || short {
		t.Errorf("all started: %v short %v", lat, short)
	}
	if got := fairBJobs(10*time.Second, 100*time.Millisecond); got != 100 {
		t.Errorf("B jobs in 10s at 100ms: %d", got)
	}
	if got := fairBJobs(50*time.Millisecond, 100*time.Millisecond); got != 1 {
		t.Errorf("B jobs in a window shorter than the interval: %d", got)
	}
}

func TestFairACompleted(t *testing.T) {
	t0 := time.Now()
	done := []completion{{1, t0}, {2, t0.Add(time.Second)}, {3, t0.Add(3 * time.Second)}, {7, t0}, {9, t0}}
	// A's ids are up to 3; id 3 completed after the window.
	if got := fairACompleted(done, 3, t0.Add(2*time.Second)); got != 2 {
		t.Errorf("A completed %d, want 2", got)
	}
	if got := fairACompleted(done, 3, t0.Add(3*time.Second)); got != 3 {
		t.Errorf("A completed %d at the window's end, want 3", got)
	}
}

func TestFairStarts(t *testing.T) {
	s := newFairStarts(10, 2)
	s.started(3) // an A job: ignored
	s.started(10)
	if s.all() {
		t.Error("all started after one of two")
	}
	s.started(11)
	s.started(11)
	at, twice := s.snapshot()
	if !s.all() || twice != 1 || at[0].IsZero() || at[1].IsZero() {
		t.Errorf("all %v twice %d at %v", s.all(), twice, at)
	}
}

// TestQueueLimits runs leasehold+limits beside leasehold (and River) on a
// real server and checks its table and its self ratios.
func TestQueueLimits(t *testing.T) {
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "queue.json")
	var out bytes.Buffer
	err := runQueue(ctx, []string{"--systems", "leasehold,river", "--limits", "--cases", "noop-burndown,io-10ms",
		"--jobs", "300", "--io-jobs", "100", "--partitions", "2", "--rounds", "2", "--keys", "50",
		"--duration", "2s", "--warmup=false", "--json", path}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"leasehold+limits / leasehold", "KeyConcurrency 1000", "leasehold+limits"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	rep := readReport(t, path)
	for _, c := range []string{caseNoopBurndown, caseIO} {
		name := limitsRatioName(c)
		if r := rep.SelfRatios[name]; r <= 0 || rep.SelfRatioSpread[name].Rounds != 2 {
			t.Errorf("%s: ratio %v spread %+v", name, r, rep.SelfRatioSpread[name])
		}
		if _, ok := rep.RatiosByPeer[sysQueueLimits]; ok {
			t.Errorf("leasehold+limits among the peers: %v", rep.RatiosByPeer)
		}
		if rep.RatiosByPeer[sysQueueRiver][c] <= 0 {
			t.Errorf("no ratio vs River in %s: %v", c, rep.RatiosByPeer)
		}
	}
}
