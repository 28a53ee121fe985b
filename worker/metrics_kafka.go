package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/kafka"
)

// kafkaCollector reports a Kafka consumer's counters (kafka.Stats), read
// at scrape time.
type kafkaCollector struct {
	c      *kafka.Consumer
	labels prometheus.Labels
}

// kafkaDesc describes one of the Kafka metrics.
type kafkaDesc struct {
	name, help string
	kind       prometheus.ValueType
	value      func(s kafka.Stats, c *kafka.Consumer) float64
}

var kafkaDescs = []kafkaDesc{
	{"leasehold_kafka_batches_total", "Kafka batches committed (effects, offset advance and fence check in one transaction).",
		prometheus.CounterValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(s.Batches) }},
	{"leasehold_kafka_records_total", "Kafka records in the committed batches.",
		prometheus.CounterValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(s.Records) }},
	{"leasehold_kafka_fenced_total", "Kafka batch commits refused because a newer owner holds the partition (rolled back).",
		prometheus.CounterValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(s.Fenced) }},
	{"leasehold_kafka_failed_total", "Kafka batches rolled back for another reason (handler or database error); handled again.",
		prometheus.CounterValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(s.Failed) }},
	{"leasehold_kafka_offset_resets_total", "Stored offsets outside the log reset to the earliest or latest offset (OutOfRange policy).",
		prometheus.CounterValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(s.Resets) }},
	{"leasehold_kafka_partitions_consumed", "Kafka partitions this worker consumes now (owned slots whose partition exists).",
		prometheus.GaugeValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(len(s.Owned)) }},
	{"leasehold_kafka_partitions_stalled", "Owned Kafka partitions not consumed: their stored offset is outside the log (OutOfRangeFail).",
		prometheus.GaugeValue, func(s kafka.Stats, _ *kafka.Consumer) float64 { return float64(len(s.Stalled)) }},
	{"leasehold_kafka_metadata_up", "1 if the consumer is open and its last read of the topics' metadata succeeded.",
		prometheus.GaugeValue, func(_ kafka.Stats, c *kafka.Consumer) float64 {
			if c.Ready() != nil {
				return 0
			}
			return 1
		}},
}

func (d kafkaDesc) desc(labels prometheus.Labels) *prometheus.Desc {
	return prometheus.NewDesc(d.name, d.help, nil, labels)
}

// Describe implements prometheus.Collector.
func (k *kafkaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range kafkaDescs {
		ch <- d.desc(k.labels)
	}
}

// Collect implements prometheus.Collector.
func (k *kafkaCollector) Collect(ch chan<- prometheus.Metric) {
	s := k.c.Stats()
	for _, d := range kafkaDescs {
		ch <- prometheus.MustNewConstMetric(d.desc(k.labels), d.kind, d.value(s, k.c))
	}
}
