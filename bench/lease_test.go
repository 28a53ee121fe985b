package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// TestMain lets the test binary serve as the failover cases' lease holder
// process, as the bench command does.
func TestMain(m *testing.M) {
	if isLeaseHolder() {
		os.Exit(leaseHolderMain(os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestLeaseSuite runs the lease suite briefly on a real server and checks
// the JSON report covers every case on both systems.
func TestLeaseSuite(t *testing.T) {
	t.Parallel() // a throwaway server of its own; checks the report's shape, not its speed
	if os.Getenv(envURL) == "" {
		if _, err := pgcluster.FindBinDir(); errors.Is(err, pgcluster.ErrNotInstalled) {
			t.Skip(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "lease.json")
	var out bytes.Buffer
	err := runLease(ctx, []string{"--duration", "300ms", "--rounds", "1", "--json", path,
		"--failover-rounds", "1", "--failover-ttl", "1s"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "leasehold / raw-sql") {
		t.Errorf("table lacks the ratios:\n%s", out.String())
	}
	checkReport(t, path, "lease", leaseCases, caseFailoverKill, caseFailoverStop)
	// A failover after kill -9 waits for the lease's expiry: at least most
	// of the TTL (1s) less the time since the last renewal (TTL/3), and a
	// graceful stop does not.
	for _, r := range readReport(t, path).Results {
		if r.Case == caseFailoverKill && r.P50Ms < 500 {
			t.Errorf("failover after kill -9 took %.1f ms, before the lease could have expired", r.P50Ms)
		}
	}
}

func TestUnknownSuite(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"no-such-suite"}, io.Discard, &stderr); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "lease") {
		t.Errorf("usage does not list the lease suite:\n%s", stderr.String())
	}
}

func TestStats(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
	s := sample{ops: 100, elapsed: time.Second}
	for i := 1; i <= 100; i++ {
		s.lat = append(s.lat, time.Duration(i)*time.Millisecond)
	}
	if q := s.quantile(0.5); q != 50*time.Millisecond {
		t.Errorf("p50 = %v", q)
	}
	if q := s.quantile(0.99); q != 99*time.Millisecond {
		t.Errorf("p99 = %v", q)
	}
	if r := s.rate(); r != 100 {
		t.Errorf("rate = %v", r)
	}
}
