package worker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
)

// metrics are a Worker's Prometheus metrics. Every metric carries the
// constant label group.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	jobs       *prometheus.CounterVec   // kind, outcome
	duration   *prometheus.HistogramVec // kind
	grants     prometheus.Counter
	handoffs   prometheus.Counter
	renew      prometheus.Histogram
	renewErrs  prometheus.Counter
	losses     prometheus.Counter
	queueDepth *queueCollector
}

func newMetrics(reg prometheus.Registerer, group string, w *Worker) (*metrics, error) {
	labels := prometheus.Labels{"group": group}
	m := &metrics{
		reg: reg,
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_jobs_total", ConstLabels: labels,
			Help: "Job runs by kind and outcome (completed, retried, discarded, cancelled, snoozed, fenced, interrupted, unrecorded, skipped).",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "leasehold_job_duration_seconds", ConstLabels: labels,
			Help:    "How long handlers ran, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms to ~131s
		}, []string{"kind"}),
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
		queueDepth: &queueCollector{w: w, group: group, labels: labels},
	}
	owned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "leasehold_partitions_owned", ConstLabels: labels,
		Help: "Partitions this worker holds now.",
	}, func() float64 { return float64(len(w.member.Owned())) })
	m.collectors = []prometheus.Collector{m.jobs, m.duration, m.grants, m.handoffs, m.renew, m.renewErrs,
		m.losses, owned, m.queueDepth}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, r := range m.collectors[:i] {
				reg.Unregister(r)
			}
			return nil, err
		}
	}
	return m, nil
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

// queueHooks returns hooks that feed the metrics and then call user's.
func (m *metrics) queueHooks(user queue.Hooks) queue.Hooks {
	return queue.Hooks{OnJob: func(e queue.JobEvent) {
		m.jobs.WithLabelValues(e.Kind, string(e.Outcome)).Inc()
		if e.Duration > 0 {
			m.duration.WithLabelValues(e.Kind).Observe(e.Duration.Seconds())
		}
		if user.OnJob != nil {
			user.OnJob(e)
		}
	}}
}

// queueCollector reports the backlog of the partitions this worker owns,
// read from the database at scrape time (at most once a second; a scrape
// within a second reuses the last reading).
type queueCollector struct {
	w      *Worker
	group  string
	labels prometheus.Labels

	mu    sync.Mutex
	at    time.Time
	stats []queue.PartitionStats
}

var (
	depthDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_depth", "Jobs due now and waiting, per owned partition.", []string{"partition"}, l)
	}
	lagDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_lag_seconds", "How long the oldest due job has been waiting, per owned partition.", []string{"partition"}, l)
	}
	retryingDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_retrying", "Pending jobs that failed before, per owned partition.", []string{"partition"}, l)
	}
	scheduledDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_scheduled", "Pending jobs due later, per owned partition.", []string{"partition"}, l)
	}
	statsErrDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_stats_up", "1 if the last reading of the queue's backlog succeeded.", nil, l)
	}
)

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []func(prometheus.Labels) *prometheus.Desc{depthDesc, lagDesc, retryingDesc, scheduledDesc, statsErrDesc} {
		ch <- d(c.labels)
	}
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	stats, err := c.read()
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(statsErrDesc(c.labels), prometheus.GaugeValue, up)
	owned := c.w.member.Owned()
	for _, s := range stats {
		if _, ok := owned[s.Partition]; !ok {
			continue
		}
		p := strconv.Itoa(s.Partition)
		ch <- prometheus.MustNewConstMetric(depthDesc(c.labels), prometheus.GaugeValue, float64(s.Pending), p)
		ch <- prometheus.MustNewConstMetric(lagDesc(c.labels), prometheus.GaugeValue, s.OldestDue.Seconds(), p)
		ch <- prometheus.MustNewConstMetric(retryingDesc(c.labels), prometheus.GaugeValue, float64(s.Retrying), p)
		ch <- prometheus.MustNewConstMetric(scheduledDesc(c.labels), prometheus.GaugeValue, float64(s.Scheduled), p)
	}
}

func (c *queueCollector) read() ([]queue.PartitionStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < time.Second && c.stats != nil {
		return c.stats, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := c.w.stats.Stats(ctx, c.group)
	if err != nil {
		c.stats = nil
		return nil, err
	}
	c.at, c.stats = time.Now(), stats
	return stats, nil
}
