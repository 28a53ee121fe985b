package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/kafka"
)

// relayCollector reports an outbox relay's counters and partitions
// (kafka.RelayStats), read at scrape time.
type relayCollector struct {
	r      *kafka.Relay
	labels prometheus.Labels
}

// relayDesc describes one of the relay metrics.
type relayDesc struct {
	name, help string
	kind       prometheus.ValueType
	value      func(s kafka.RelayStats) float64
}

var relayDescs = []relayDesc{
	{"leasehold_outbox_transactions_total", "Kafka transactions the outbox relay committed (records and progress together).",
		prometheus.CounterValue, func(s kafka.RelayStats) float64 { return float64(s.Transactions) }},
	{"leasehold_outbox_records_total", "Outbox records published to Kafka.",
		prometheus.CounterValue, func(s kafka.RelayStats) float64 { return float64(s.Records) }},
	{"leasehold_outbox_fenced_total", "Outbox publishes refused because a newer producer of the partition fenced this one (nothing published).",
		prometheus.CounterValue, func(s kafka.RelayStats) float64 { return float64(s.Fenced) }},
	{"leasehold_outbox_failed_total", "Outbox publishes that failed otherwise (Kafka or database error); published again after a backoff.",
		prometheus.CounterValue, func(s kafka.RelayStats) float64 { return float64(s.Failed) }},
	{"leasehold_outbox_partitions", "Partitions whose outbox this worker relays now.",
		prometheus.GaugeValue, func(s kafka.RelayStats) float64 { return float64(len(s.Partitions)) }},
	{"leasehold_outbox_partitions_failing", "Relayed partitions whose last publish failed.",
		prometheus.GaugeValue, func(s kafka.RelayStats) float64 {
			n := 0
			for _, p := range s.Partitions {
				if p.Err != "" {
					n++
				}
			}
			return float64(n)
		}},
	{"leasehold_outbox_pending_segments", "Committed outbox segments (handler transactions) the relay's last reads found unpublished, summed over partitions (each at most a read's worth).",
		prometheus.GaugeValue, func(s kafka.RelayStats) float64 {
			var n int64
			for _, p := range s.Partitions {
				n += p.Pending
			}
			return float64(n)
		}},
	{"leasehold_outbox_lag_seconds", "Age of the oldest committed outbox segment not yet published, over this worker's partitions (0 when published).",
		prometheus.GaugeValue, func(s kafka.RelayStats) float64 {
			var lag float64
			for _, p := range s.Partitions {
				lag = max(lag, p.Lag.Seconds())
			}
			return lag
		}},
}

func (d relayDesc) desc(labels prometheus.Labels) *prometheus.Desc {
	return prometheus.NewDesc(d.name, d.help, nil, labels)
}

// Describe implements prometheus.Collector.
func (c *relayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range relayDescs {
		ch <- d.desc(c.labels)
	}
}

// Collect implements prometheus.Collector.
func (c *relayCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.r.Stats()
	for _, d := range relayDescs {
		ch <- prometheus.MustNewConstMetric(d.desc(c.labels), d.kind, d.value(s))
	}
}
