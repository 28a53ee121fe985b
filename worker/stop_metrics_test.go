package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// keptRegistry keeps metrics registered when the worker unregisters them at
// Stop, so that their final values can be read.
type keptRegistry struct{ *prometheus.Registry }

func (keptRegistry) Unregister(prometheus.Collector) bool { return true }

// counter reads the value of a counter or a gauge, or the sample count of
// a histogram (summed over the series).
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	pgtest.Must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var v float64
		for _, m := range mf.GetMetric() {
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		return v
	}
	return 0
}

// Handoffs count the grants given up to another worker after a rebalance,
// not those given up at Stop; renewals are observed; no lease is lost.
func TestHandoffAndLeaseMetrics(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	group(t, pool, 4)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[deposit]) error { return nil })
	reg := prometheus.NewRegistry()
	w1 := start(t, pool, worker.Config{ID: "w1", Partitions: 4, Workers: ws, Registerer: keptRegistry{reg}})
	for start := time.Now(); len(w1.Owned()) < 4 || counter(t, reg, "leasehold_lease_renew_duration_seconds") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("w1 owns %d of 4 partitions, renewals observed %v", len(w1.Owned()),
				counter(t, reg, "leasehold_lease_renew_duration_seconds"))
		}
	}
	w2 := start(t, pool, worker.Config{ID: "w2", Partitions: 4, Workers: ws})
	for start := time.Now(); len(w1.Owned()) == 0 || len(w2.Owned()) == 0 || len(w1.Owned())+len(w2.Owned()) != 4 ||
		counter(t, reg, "leasehold_partition_grants_total")-counter(t, reg, "leasehold_partition_handoffs_total") != float64(len(w1.Owned())); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("no convergence: w1 owns %d, w2 %d, grants %v, handoffs %v", len(w1.Owned()), len(w2.Owned()),
				counter(t, reg, "leasehold_partition_grants_total"), counter(t, reg, "leasehold_partition_handoffs_total"))
		}
	}
	grants, handoffs := counter(t, reg, "leasehold_partition_grants_total"), counter(t, reg, "leasehold_partition_handoffs_total")
	if handoffs == 0 {
		t.Fatalf("w1 gave partitions to w2 but counted no handoff (grants %v)", grants)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pgtest.Must(t, w1.Stop(ctx))
	if got := counter(t, reg, "leasehold_partition_handoffs_total"); got != handoffs {
		t.Errorf("handoffs %v after Stop, %v before: partitions given up at Stop counted as handoffs", got, handoffs)
	}
	if got := counter(t, reg, "leasehold_lease_losses_total"); got != 0 {
		t.Errorf("%v leases lost; want none", got)
	}
}
