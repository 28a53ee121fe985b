package worker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// queueMetrics are the queue source's metrics: job runs and durations, fed
// by the processor's hooks, and the backlog of the owned partitions.
type queueMetrics struct {
	workers  *queue.Workers           // the kinds with a handler: the only kinds labelled as such
	jobs     *prometheus.CounterVec   // kind, outcome
	duration *prometheus.HistogramVec // kind
	depth    *queueCollector
}

// unknownKind is the kind label of the runs of jobs whose kind has no
// handler: any producer can enqueue any kind, and a label per kind seen
// would let it create series without bound in every worker.
const unknownKind = "unknown"

func newQueueMetrics(labels prometheus.Labels, stats *queue.Client, group string, workers *queue.Workers,
	owned func() map[int]partition.Ownership) *queueMetrics {
	return &queueMetrics{
		workers: workers,
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_jobs_total", ConstLabels: labels,
			Help: "Job runs by kind (\"unknown\" for kinds without a handler) and outcome (completed, retried, discarded, cancelled, snoozed, fenced, interrupted, unrecorded, skipped).",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "leasehold_job_duration_seconds", ConstLabels: labels,
			Help:    "How long handlers ran, by kind.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms to ~131s
		}, []string{"kind"}),
		depth: &queueCollector{stats: stats, owned: owned, group: group, labels: labels},
	}
}

func (m *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.jobs, m.duration, m.depth}
}

// hooks returns hooks that feed the metrics and then call user's.
func (m *queueMetrics) hooks(user queue.Hooks) queue.Hooks {
	return queue.Hooks{OnJob: func(e queue.JobEvent) {
		kind := e.Kind
		if m.workers == nil || !m.workers.Handles(kind) {
			kind = unknownKind
		}
		m.jobs.WithLabelValues(kind, string(e.Outcome)).Inc()
		if e.Duration > 0 {
			m.duration.WithLabelValues(kind).Observe(e.Duration.Seconds())
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
	stats  *queue.Client
	owned  func() map[int]partition.Ownership
	group  string
	labels prometheus.Labels
	// limited reports the jobs held back by limits (Processor.Limited);
	// set once the processor is built, before any scrape.
	limited func() map[queue.Limit]int64

	mu    sync.Mutex
	at    time.Time
	cache []queue.PartitionStats
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
	limitedDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_limited_jobs",
			"Due jobs of the owned partitions held back by a limit now: key_concurrency, key_rate or group_concurrency (as of each partition's last snapshot, at most a poll interval old).",
			[]string{"limit"}, l)
	}
	statsErrDesc = func(l prometheus.Labels) *prometheus.Desc {
		return prometheus.NewDesc("leasehold_queue_stats_up", "1 if the last reading of the queue's backlog succeeded.", nil, l)
	}
)

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []func(prometheus.Labels) *prometheus.Desc{depthDesc, lagDesc, retryingDesc, scheduledDesc, limitedDesc, statsErrDesc} {
		ch <- d(c.labels)
	}
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	if c.limited != nil { // read in memory: every limit, always
		held := c.limited()
		for _, l := range queue.Limits {
			ch <- prometheus.MustNewConstMetric(limitedDesc(c.labels), prometheus.GaugeValue, float64(held[l]), string(l))
		}
	}
	stats, err := c.read()
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(statsErrDesc(c.labels), prometheus.GaugeValue, up)
	owned := c.owned()
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
	if time.Since(c.at) < time.Second && c.cache != nil {
		return c.cache, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := c.stats.Stats(ctx, c.group)
	if err != nil {
		c.cache = nil
		return nil, err
	}
	c.at, c.cache = time.Now(), stats
	return stats, nil
}
