package lograte_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/logtest"
)

const interval = 10 * time.Second

func newLimiter(t *testing.T) (*lograte.Limiter, *logtest.Recorder, *fakeclock.Clock) {
	t.Helper()
	rec, log := logtest.New(slog.LevelDebug)
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l, err := lograte.New(log, lograte.Config{
		Interval:  interval,
		Now:       clk.Now,
		AfterFunc: func(d time.Duration, f func()) { clk.AfterFunc(d, f) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, rec, clk
}

// waitCount waits (bounded) until rec holds n records of level and msg:
// the limiter's flushes run in the fake clock's timer goroutines.
func waitCount(t *testing.T, rec *logtest.Recorder, level slog.Level, msg string, n int) {
	t.Helper()
	for start := time.Now(); rec.Count(level, msg) < n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d %v %q lines, want %d; records:\n%s", rec.Count(level, msg), level, msg, n, rec.Summary())
		}
	}
}

// warnLines returns the WARN records of msg with the number of failures
// each stands for.
func warnLines(rec *logtest.Recorder, msg string) (lines []logtest.Record, failures int) {
	for _, r := range rec.Records() {
		if r.Level == slog.LevelWarn && r.Message == msg {
			lines = append(lines, r)
			n := 1
			if v, ok := r.Attrs["repeated"]; ok {
				n = int(v.Int64())
			}
			failures += n
		}
	}
	return lines, failures
}

func TestFirstFailureAtOnceThenOneCountedLinePerInterval(t *testing.T) {
	l, rec, clk := newLimiter(t)
	l.Fail("renew", "renewal failed", "attempt", 1)
	if n := rec.Count(slog.LevelWarn, "renewal failed"); n != 1 {
		t.Fatalf("%d lines after the first failure; want 1 at once", n)
	}
	for i := 2; i <= 50; i++ {
		clk.Advance(100 * time.Millisecond)
		l.Fail("renew", "renewal failed", "attempt", i)
	}
	if n := rec.Count(slog.LevelWarn, "renewal failed"); n != 1 {
		t.Fatalf("%d lines within the interval; want 1", n)
	}
	clk.Advance(interval - 49*100*time.Millisecond) // the interval is up: the pending count is logged
	waitCount(t, rec, slog.LevelWarn, "renewal failed", 2)
	lines, failures := warnLines(rec, "renewal failed")
	last := lines[len(lines)-1]
	if got := last.Attrs["repeated"].Int64(); got != 49 {
		t.Errorf("repeated=%d; want 49", got)
	}
	if got := last.Attrs["attempt"].Int64(); got != 50 {
		t.Errorf("the counted line carries attempt=%d; want the latest failure's, 50", got)
	}
	if got := last.Attrs["over"].Duration(); got != interval {
		t.Errorf("over=%v; want %v", got, interval)
	}
	if failures != 50 {
		t.Errorf("the lines stand for %d failures; want 50", failures)
	}

	l.Recovered("renew", "renewal recovered", "leases", 3)
	l.Recovered("renew", "renewal recovered", "leases", 3) // not failing: nothing
	recs := rec.Records()
	if n := rec.Count(slog.LevelInfo, "renewal recovered"); n != 1 {
		t.Fatalf("%d recovery lines; want 1", n)
	}
	r := recs[len(recs)-1]
	if r.Attrs["failures"].Int64() != 50 || r.Attrs["leases"].Int64() != 3 {
		t.Errorf("recovery attrs %v; want failures=50 leases=3", r.Attrs)
	}
	if d := r.Attrs["failing_for"].Duration(); d != interval {
		t.Errorf("failing_for=%v", d)
	}
}

// Over a long outage a kind logs at most one line per interval, and the
// lines account for every failure.
func TestLongOutageBoundedLinesNoFailureUncounted(t *testing.T) {
	l, rec, clk := newLimiter(t)
	const total, step = 2000, 50 * time.Millisecond // 100s of failures
	for range total {
		l.Fail("fetch", "fetch failed")
		clk.Advance(step)
	}
	clk.Advance(interval)
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, f := warnLines(rec, "fetch failed"); f == total {
			break
		} else if time.Since(start) > 10*time.Second {
			t.Fatalf("the lines stand for %d failures; want %d:\n%s", f, total, rec.Summary())
		}
	}
	lines, _ := warnLines(rec, "fetch failed")
	if max := int(total*step/interval) + 2; len(lines) > max {
		t.Errorf("%d lines for %v of failures; want at most %d", len(lines), total*step, max)
	}
	for i := 1; i < len(lines); i++ {
		if d := lines[i].Attrs["over"].Duration(); d < interval {
			t.Errorf("line %d comes %v after the previous one; want at least %v", i, d, interval)
		}
	}
}

// Negative controls: the limiter suppresses nothing it should not. Kinds
// are independent, and failures further apart than the interval are each
// logged at once.
func TestKindsIndependentAndSparseFailuresAllLogged(t *testing.T) {
	l, rec, clk := newLimiter(t)
	l.Fail("renew", "renewal failed")
	l.Fail("heartbeat", "heartbeat failed")
	if rec.Count(slog.LevelWarn, "renewal failed") != 1 || rec.Count(slog.LevelWarn, "heartbeat failed") != 1 {
		t.Fatalf("one kind's line suppressed another's:\n%s", rec.Summary())
	}
	for i := 2; i <= 5; i++ {
		clk.Advance(interval)
		l.Fail("renew", "renewal failed")
		if n := rec.Count(slog.LevelWarn, "renewal failed"); n != i {
			t.Fatalf("failure %d, %v after the previous: %d lines; want %d", i, interval, n, i)
		}
	}
	if lines, _ := warnLines(rec, "renewal failed"); lines[len(lines)-1].Attrs["repeated"].Kind() != slog.KindAny {
		t.Errorf("a line standing for one failure carries repeated=%v", lines[len(lines)-1].Attrs["repeated"])
	}
}

// A kind that fails and recovers over and over logs at most one WARN and
// one recovery line per interval, and counts every failure.
func TestFlappingBounded(t *testing.T) {
	l, rec, clk := newLimiter(t)
	const cycles, step = 400, 100 * time.Millisecond // 40s of flapping
	for range cycles {
		l.Fail("claim", "claiming failed")
		clk.Advance(step / 2)
		l.Recovered("claim", "claiming recovered")
		clk.Advance(step / 2)
	}
	clk.Advance(interval)
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, f := warnLines(rec, "claiming failed"); f == cycles {
			break
		} else if time.Since(start) > 10*time.Second {
			t.Fatalf("the lines stand for %d failures; want %d:\n%s", f, cycles, rec.Summary())
		}
	}
	max := int(cycles*step/interval) + 2
	if lines, _ := warnLines(rec, "claiming failed"); len(lines) > max {
		t.Errorf("%d WARN lines in %v of flapping; want at most %d", len(lines), cycles*step, max)
	}
	if n := rec.Count(slog.LevelInfo, "claiming recovered"); n > max || n == 0 {
		t.Errorf("%d recovery lines in %v of flapping; want 1 to %d", n, cycles*step, max)
	}
}

func TestCloseLogsPendingCounts(t *testing.T) {
	l, rec, _ := newLimiter(t)
	for range 5 {
		l.Fail("release", "release not confirmed")
	}
	l.Close()
	if lines, f := warnLines(rec, "release not confirmed"); len(lines) != 2 || f != 5 {
		t.Fatalf("%d lines standing for %d failures after Close; want 2 standing for 5", len(lines), f)
	}
	l.Fail("release", "release not confirmed")
	if n := rec.Count(slog.LevelWarn, "release not confirmed"); n != 3 {
		t.Fatalf("a failure after Close: %d lines; want it logged at once (3)", n)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := lograte.New(nil, lograte.Config{}); !errors.Is(err, lograte.ErrInvalidConfig) {
		t.Errorf("nil logger: %v", err)
	}
	if _, err := lograte.New(slog.Default(), lograte.Config{Interval: -time.Second}); !errors.Is(err, lograte.ErrInvalidConfig) {
		t.Errorf("negative interval: %v", err)
	}
	l, err := lograte.New(slog.Default(), lograte.Config{})
	if err != nil || l.Interval() != lograte.DefaultInterval {
		t.Errorf("zero config: %v, interval %v", err, l.Interval())
	}
}
