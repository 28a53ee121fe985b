package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/lease"
)

// metrics are a Worker's Prometheus metrics: the partition and lease
// metrics every worker has, and its source's own (metrics_queue.go,
// metrics_kafka.go). Every metric carries the constant label group.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	grants    prometheus.Counter
	handoffs  prometheus.Counter
	renew     prometheus.Histogram
	renewErrs prometheus.Counter
	losses    prometheus.Counter
	owned     prometheus.GaugeFunc
}

// newMetrics returns the partition and lease metrics, unregistered; owned
// reports how many partitions the worker holds now.
func newMetrics(labels prometheus.Labels, owned func() float64) *metrics {
	return &metrics{
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_partition_grants_total", ConstLabels: labels,
			Help: "Partitions granted to this worker.",
		}),
		handoffs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_partition_handoffs_total", ConstLabels: labels,
			Help: "Partitions this worker handed off to another worker after a rebalance.",
		}),
		renew: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leasehold_lease_renew_duration_seconds", ConstLabels: labels,
			Help:    "Latency of the statement renewing all of this worker's leases.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms to ~4s
		}),
		renewErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_lease_renew_errors_total", ConstLabels: labels,
			Help: "Renewal statements that failed.",
		}),
		losses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_lease_losses_total", ConstLabels: labels,
			Help: "Partition leases this worker lost (expired or superseded) rather than released.",
		}),
		owned: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leasehold_partitions_owned", ConstLabels: labels,
			Help: "Partitions this worker holds now.",
		}, owned),
	}
}

// register registers the metrics and the source's collectors with reg, all
// or none.
func (m *metrics) register(reg prometheus.Registerer, source ...prometheus.Collector) error {
	m.reg = reg
	m.collectors = append([]prometheus.Collector{m.grants, m.handoffs, m.renew, m.renewErrs, m.losses, m.owned},
		source...)
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, r := range m.collectors[:i] {
				reg.Unregister(r)
			}
			m.collectors = nil
			return err
		}
	}
	return nil
}

func (m *metrics) unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}

// leaseHooks returns hooks that feed the metrics and then call user's.
func (m *metrics) leaseHooks(user lease.Hooks) lease.Hooks {
	h := user
	h.OnRenew = func(e lease.RenewEvent) {
		m.renew.Observe(e.Latency.Seconds())
		if e.Err != nil {
			m.renewErrs.Inc()
		}
		if user.OnRenew != nil {
			user.OnRenew(e)
		}
	}
	h.OnLoss = func(e lease.LossEvent) {
		m.losses.Inc()
		if user.OnLoss != nil {
			user.OnLoss(e)
		}
	}
	return h
}
