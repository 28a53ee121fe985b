package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

type flaky struct {
	Fail bool `json:"fail"`
}

func (flaky) Kind() string { return "flaky" }

// The metrics count job runs by kind and outcome, the partitions owned, and
// the backlog of owned partitions; the endpoints answer.
func TestMetricsAndEndpoints(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	group(t, pool, 8)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	var jobs []queue.Job
	for i := range 20 {
		jobs = append(jobs, queue.Job{Group: "g", Key: string(rune('a' + i)), Args: flaky{Fail: i < 3}, MaxAttempts: 1})
	}
	jobs = append(jobs, queue.Job{Group: "g", Key: "later", Args: flaky{}, RunAt: time.Now().Add(time.Hour)})
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[flaky]) error {
		if w.Args.Fail {
			return errors.New("boom")
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	w := start(t, pool, worker.Config{Workers: ws, Registerer: reg})
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		var pending int
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE state = 'pending' AND run_at < now()`).Scan(&pending))
		if pending == 0 && len(w.Owned()) == 8 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d jobs due", pending)
		}
	}
	time.Sleep(100 * time.Millisecond) // the last batch's hooks

	const want = `
# HELP leasehold_jobs_total Job runs by kind ("unknown" for kinds without a handler) and outcome (completed, retried, discarded, cancelled, snoozed, fenced, interrupted, unrecorded, skipped).
# TYPE leasehold_jobs_total counter
leasehold_jobs_total{group="g",kind="flaky",outcome="completed"} 17
leasehold_jobs_total{group="g",kind="flaky",outcome="discarded"} 3
# HELP leasehold_partitions_owned Partitions this worker holds now.
# TYPE leasehold_partitions_owned gauge
leasehold_partitions_owned{group="g"} 8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leasehold_jobs_total", "leasehold_partitions_owned"); err != nil {
		t.Fatal(err)
	}
	scheduled, err := testutil.GatherAndCount(reg, "leasehold_queue_scheduled")
	pgtest.Must(t, err)
	if scheduled != 8 {
		t.Errorf("%d leasehold_queue_scheduled series; want one per owned partition", scheduled)
	}
	if n := testutil.CollectAndCount(reg, "leasehold_job_duration_seconds"); n != 1 {
		t.Errorf("%d job duration series; want 1 (kind flaky)", n)
	}

	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		pgtest.Must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `leasehold_queue_scheduled{group="g",partition=`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(p); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pgtest.Must(t, w.Stop(sctx))
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(p); code != http.StatusServiceUnavailable {
			t.Errorf("%s after Stop: %d; want 503", p, code)
		}
	}
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("%d series left registered after Stop", n)
	}
}

// New refuses bad configurations with ErrInvalidConfig, and a second worker
// on the same registry with a registration error.
func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ws := queue.NewWorkers()
	for name, cfg := range map[string]worker.Config{
		"no workers":           {Group: "g"},
		"no group":             {Workers: ws},
		"negative partitions":  {Group: "g", Workers: ws, Partitions: -1},
		"too many partitions":  {Group: "g", Workers: ws, Partitions: 1 << 20},
		"negative concurrency": {Group: "g", Workers: ws, Concurrency: -1},
		"grace too long":       {Group: "g", Workers: ws, StopGrace: time.Minute, HandoffTimeout: time.Second},
		"grace = handoff":      {Group: "g", Workers: ws, StopGrace: time.Second, HandoffTimeout: time.Second},
		"lease owner":          {Group: "g", Workers: ws, Lease: lease.Config{Owner: "x"}},
		"queue concurrency":    {Group: "g", Workers: ws, Queue: queue.ProcessorConfig{Concurrency: 3}},
		"queue workers":        {Group: "g", Workers: ws, Queue: queue.ProcessorConfig{Workers: ws}},
		"ttl too short":        {Group: "g", Workers: ws, HandoffTimeout: time.Second, Lease: leaseTTL(time.Millisecond)},
	} {
		if _, err := worker.New(pgtest.DBOn(t, pool), cfg); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("%s: %v; want ErrInvalidConfig", name, err)
		}
	}
	if _, err := worker.New(nil, worker.Config{Group: "g", Workers: ws}); !errors.Is(err, worker.ErrInvalidConfig) {
		t.Errorf("nil db: %v", err)
	}
	dup := queue.NewWorkers()
	queue.Handle(dup, func(context.Context, *queue.Work[deposit]) error { return nil })
	queue.Handle(dup, func(context.Context, *queue.Work[deposit]) error { return nil })
	if _, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Workers: dup}); !errors.Is(err, worker.ErrInvalidConfig) ||
		!errors.Is(err, queue.ErrDuplicateHandler) {
		t.Errorf("two handlers for one kind: %v; want ErrInvalidConfig and queue.ErrDuplicateHandler", err)
	}
	reg := prometheus.NewRegistry()
	w, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Workers: ws, Registerer: reg})
	pgtest.Must(t, err)
	defer w.Stop(context.Background())
	if _, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Workers: ws, Registerer: reg}); err == nil {
		t.Error("a second worker registered the same metrics on one registry")
	}
	pgtest.Must(t, w.Stop(context.Background()))
	if err := w.Start(context.Background()); !errors.Is(err, worker.ErrStopped) {
		t.Errorf("Start after Stop: %v; want ErrStopped", err)
	}
}

// A metrics address that cannot be listened on fails Start with an error,
// and leaves the worker stopped, its metrics unregistered.
func TestStartFailsOnABusyMetricsAddress(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	pgtest.Must(t, err)
	defer busy.Close()
	reg := prometheus.NewRegistry()
	w, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Workers: queue.NewWorkers(), Registerer: reg,
		MetricsAddr: busy.Addr().String()})
	pgtest.Must(t, err)
	if err := w.Start(pgtest.Context(t)); err == nil || !strings.Contains(err.Error(), "metrics server") {
		t.Fatalf("Start on a busy address: %v; want a metrics server error", err)
	}
	if err := w.Start(pgtest.Context(t)); !errors.Is(err, worker.ErrStopped) {
		t.Errorf("Start after a failed Start: %v; want ErrStopped", err)
	}
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("%d series left registered after a failed Start", n)
	}
}

// anyKind is a job of any kind: a producer's kinds are not the worker's.
type anyKind struct {
	K string `json:"k"`
}

func (a anyKind) Kind() string { return a.K }

// Jobs of kinds without a handler are counted under the one kind label
// "unknown": 100 distinct unknown kinds make one series, not 100. A kind
// with a handler keeps its own label (the control).
func TestMetricsLabelUnknownKindsAsOne(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	group(t, pool, 8)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	jobs := []queue.Job{{Group: "g", Args: flaky{}}}
	for i := range 100 {
		jobs = append(jobs, queue.Job{Group: "g", Args: anyKind{K: fmt.Sprintf("producer_kind_%d", i)}})
	}
	_, err = c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[flaky]) error { return nil })
	reg := prometheus.NewRegistry()
	start(t, pool, worker.Config{Workers: ws, Registerer: reg, Queue: queue.ProcessorConfig{UnknownKindDelay: time.Hour}})
	// runs sums the runs counted with the given labels ("": any value).
	runs := func(kind, outcome string) float64 {
		mfs, err := reg.Gather()
		pgtest.Must(t, err)
		var n float64
		for _, mf := range mfs {
			if mf.GetName() != "leasehold_jobs_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if (kind == "" || labels["kind"] == kind) && (outcome == "" || labels["outcome"] == outcome) {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return n
	}
	for start := time.Now(); runs("", "") < 101; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%v runs counted; want 101", runs("", ""))
		}
	}
	if u, f := runs("unknown", "snoozed"), runs("flaky", "completed"); u != 100 || f != 1 {
		t.Errorf("%v unknown/snoozed and %v flaky/completed runs; want 100 and 1", u, f)
	}
	if n := testutil.CollectAndCount(reg, "leasehold_jobs_total"); n != 2 {
		t.Errorf("%d leasehold_jobs_total series; want 2 (flaky/completed, unknown/snoozed)", n)
	}
}
