package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// waitFor polls cond (bounded) until it holds.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > within {
			t.Fatalf("waited %v for %s", within, what)
		}
	}
}

// idleRun starts a worker of n partitions on an empty queue, lets it hold
// all of them through renewals renewal cycles (counted by the lease hook,
// not timed), stops it, and returns its log records from DEBUG up.
func idleRun(t *testing.T, n, renewals int) *logtest.Recorder {
	rec, log := logtest.New(slog.LevelDebug)
	db := pgtest.Open(t, pgtest.Pool(t), leasehold.Config{Logger: log})
	var full atomic.Int64 // renewals that renewed all n leases
	ws := queue.NewWorkers()
	queue.HandleTx(ws, record("w"))
	w, err := worker.New(db, worker.Config{Group: "g", ID: "w", Partitions: n, Workers: ws,
		Concurrency: 4, // within the test pool: no "fewer connections" notice
		Lease: lease.Config{TTL: 4 * time.Second, Hooks: lease.Hooks{OnRenew: func(e lease.RenewEvent) {
			if e.Err == nil && e.Renewed == n {
				full.Add(1)
			}
		}}},
		MembershipPollInterval: 100 * time.Millisecond})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(pgtest.Context(t)))
	waitFor(t, 60*time.Second, fmt.Sprintf("%d renewals of all %d leases", renewals, n),
		func() bool { return full.Load() >= int64(renewals) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pgtest.Must(t, w.Stop(ctx))
	return rec
}

// An idle worker logs a handful of INFO lines, the same for 8 and for 64
// partitions: started and stopped, joined and left, one line for the
// rebalance. Per-partition grants and releases are DEBUG (and do scale:
// the control that they happened).
func TestIdleWorkerInfoLinesDoNotScaleWithPartitions(t *testing.T) {
	t.Parallel()
	info := map[int]int{}
	for _, n := range []int{8, 64} {
		rec := idleRun(t, n, 3)
		info[n] = rec.Count(slog.LevelInfo, "")
		t.Logf("%d partitions, 3 renewal cycles:\n%s", n, rec.Summary())
		if got := rec.Count(slog.LevelDebug, "lease: acquired"); got != n {
			t.Errorf("%d partitions: %d DEBUG \"lease: acquired\" lines; want %d (one per grant)", n, got, n)
		}
		if w := rec.Count(slog.LevelWarn, "") + rec.Count(slog.LevelError, ""); w > 0 {
			t.Errorf("%d partitions: %d WARN/ERROR lines while idle", n, w)
		}
		var changed []logtest.Record
		for _, r := range rec.Records() {
			if r.Message == "partition: assignment changed" {
				changed = append(changed, r)
			}
		}
		if len(changed) != 1 || changed[0].Level != slog.LevelInfo ||
			changed[0].Attrs["owned"].Int64() != int64(n) || changed[0].Attrs["added"].Int64() != int64(n) {
			t.Errorf("%d partitions: assignment lines %v; want one INFO line owned=%d added=%d", n, changed, n, n)
		}
	}
	if info[8] != info[64] || info[64] > 5 {
		t.Errorf("INFO lines: %d with 8 partitions, %d with 64; want the same, at most 5", info[8], info[64])
	}
}

// A database outage long enough to lose every lease logs each kind of
// failure at WARN at most once per lograte interval, the lines account for
// every loss, and the recoveries are logged at INFO once the network heals.
func TestDatabaseOutageLogsRateLimited(t *testing.T) {
	t.Parallel()
	const n = 16
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	cut, proxy := pgtest.ProxiedPool(t, url, func(c *pgxpool.Config) { c.ConnConfig.ConnectTimeout = time.Second })

	rec, log := logtest.New(slog.LevelInfo)
	var losses atomic.Int64
	ws := queue.NewWorkers()
	queue.HandleTx(ws, record("w"))
	w, err := worker.New(pgtest.Open(t, cut, leasehold.Config{Logger: log}), worker.Config{
		Group: "g", ID: "w", Partitions: n, Workers: ws, Concurrency: 4,
		Lease:                  lease.Config{TTL: 2 * time.Second, Hooks: lease.Hooks{OnLoss: func(lease.LossEvent) { losses.Add(1) }}},
		Queue:                  queue.ProcessorConfig{PollInterval: 50 * time.Millisecond},
		MembershipPollInterval: 200 * time.Millisecond})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(ctx))
	waitFor(t, 30*time.Second, "all partitions owned", func() bool { return len(w.Owned()) == n })

	began := time.Now()
	proxy.Blackhole()
	waitFor(t, 30*time.Second, "every partition given up", func() bool { return len(w.Owned()) == 0 })
	// The member keeps failing with no lease left: an outage longer than
	// the interval, so that counted lines are logged during it.
	time.Sleep(12*time.Second - time.Since(began))
	proxy.Heal()
	recovered := []string{"partition: heartbeat recovered", "partition: reading the membership recovered",
		"lease: renewal recovered"}
	waitFor(t, 60*time.Second, "the partitions owned again", func() bool { return len(w.Owned()) == n })
	missing := func() (m []string) {
		for _, msg := range recovered {
			if rec.Count(slog.LevelInfo, msg) == 0 {
				m = append(m, msg)
			}
		}
		return m
	}
	for start := time.Now(); len(missing()) > 0 && time.Since(start) < 30*time.Second; {
		time.Sleep(20 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Errorf("no INFO recovery line %q after healing", m)
	}
	running := len(rec.Records()) // the lines before Stop, which flushes the pending counts at once
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pgtest.Must(t, w.Stop(sctx))
	elapsed := time.Since(began)
	t.Logf("outage and recovery over %v; %d leases lost:\n%s", elapsed, losses.Load(), rec.Summary())

	// At most one line per interval per kind: the number of lines of each
	// message is bounded by the elapsed time (a bound that load only
	// loosens), and a counted line (with over) comes an interval after the
	// previous line of its kind, by the limiter's clock.
	lines := map[string][]logtest.Record{}
	spaced := map[string][]logtest.Record{} // before Stop
	for i, r := range rec.Records() {
		if r.Level == slog.LevelWarn {
			lines[r.Message] = append(lines[r.Message], r)
			if i < running {
				spaced[r.Message] = append(spaced[r.Message], r)
			}
		}
	}
	bound := 2 + int(elapsed/lograte.DefaultInterval) // the first line, one per interval, the flush at Stop
	for msg, ls := range lines {
		if len(ls) > bound {
			t.Errorf("%d WARN lines %q in %v; want at most %d", len(ls), msg, elapsed, bound)
		}
	}
	for msg, ls := range spaced {
		for i, r := range ls[1:] {
			if over, ok := r.Attrs["over"]; ok && over.Duration() < lograte.DefaultInterval {
				t.Errorf("%q line %d only %v after the previous", msg, i+1, over.Duration())
			}
		}
	}
	// No loss goes uncounted: the "lease: lost" lines stand for every loss.
	counted := 0
	for _, r := range lines["lease: lost"] {
		if v, ok := r.Attrs["repeated"]; ok {
			counted += int(v.Int64())
		} else {
			counted++
		}
	}
	if losses.Load() < n || int64(counted) != losses.Load() {
		t.Errorf("the \"lease: lost\" lines stand for %d losses; the hook saw %d (want at least %d)", counted, losses.Load(), n)
	}
}
