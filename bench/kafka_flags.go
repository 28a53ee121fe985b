package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// The kafka suite's cases, in the order they run within a round.
var kafkaCases = []string{"noop", "one-row", "handoff", caseOutbox, caseOutboxTrickle}

// kafkaFlags are the kafka suite's command-line settings.
type kafkaFlags struct {
	records    int
	partitions int
	rounds     int
	batch      int
	handoffs   int
	brokers    string
	duration   time.Duration
	nonDurable bool
	jsonPath   string
	markdown   bool
	cases      []string

	// The outbox cases.
	outboxRecords    int
	outboxRate       float64
	outboxTrickle    time.Duration
	outboxIdle       time.Duration
	outboxMaxRecords int
	outboxStats      string
}

// The --outbox-stats choices: what the planner knows of the outbox tables
// when the relay drains the backlog.
var outboxStatsModes = []string{"analyze", "none", "auto"}

func parseKafkaFlags(args []string, stderr io.Writer) (kafkaFlags, error) {
	var f kafkaFlags
	fs := newSuiteFlags("kafka", stderr)
	fs.IntVar(&f.records, "records", 300000, "records in the topic (produced once, untimed); every throughput measurement consumes all of them")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the topic (and of the leasehold group); the outbox cases' group and output topic have as many")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds; the report gives medians over them")
	fs.IntVar(&f.batch, "batch", 500, "records per transaction at most (Config.MaxBatch; the raw system polls as many)")
	fs.IntVar(&f.handoffs, "handoffs", 4, "handoff case: join/leave cycles of a second worker per round")
	fs.StringVar(&f.brokers, "brokers", os.Getenv("KAFKA_BROKERS"), "Kafka seed brokers (comma-separated); empty runs an in-process kfake cluster")
	fs.DurationVar(&f.duration, "duration", 60*time.Second, "cap on each measurement (an error past it)")
	fs.BoolVar(&f.nonDurable, "non-durable", false, "run the throwaway cluster with fsync, synchronous_commit and full_page_writes off "+
		"(the default keeps PostgreSQL's own: on; a DATABASE_URL server keeps its settings)")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown, with a line describing the machine and settings")
	fs.IntVar(&f.outboxRecords, "outbox-records", 50000, "outbox case: records in the backlog (one queue job each, appended untimed, then drained)")
	fs.Float64Var(&f.outboxRate, "outbox-rate", 200, "outbox-trickle case: jobs (one record each) enqueued per second")
	fs.DurationVar(&f.outboxTrickle, "outbox-trickle", 10*time.Second, "outbox-trickle case: how long the trickle lasts")
	fs.DurationVar(&f.outboxIdle, "outbox-idle", 5*time.Second, "outbox-trickle case: idle window after the trickle, in which the relay's statements are counted")
	fs.IntVar(&f.outboxMaxRecords, "outbox-max-records", 0, "records per Kafka transaction (the relay's RelayConfig.MaxRecords and the bare producers'); 0: the relay's default")
	fs.StringVar(&f.outboxStats, "outbox-stats", "analyze", "outbox case: the outbox tables' planner statistics at the drain: "+
		"analyze (ANALYZE after the backlog was appended, as once autovacuum has seen it), "+
		"none (never analyzed with rows in them: autovacuum off for them from the start, as in a deployment whose first backlog comes "+
		"before autovacuum analyzed them; the relay's read and delete then compare every record of a partition with every segment read), "+
		"auto (whatever autovacuum did)")
	cases := fs.String("cases", strings.Join(kafkaCases, ","), "comma-separated cases to run")
	if err := parseSuiteFlags(fs, args); err != nil {
		return f, err
	}
	switch {
	case f.records < 1:
		return f, errors.New("--records must be at least 1")
	case f.partitions < 1 || f.partitions > 1024:
		return f, errors.New("--partitions must be 1 to 1024")
	case f.rounds < 1:
		return f, errors.New("--rounds must be at least 1")
	case f.batch < 1:
		return f, errors.New("--batch must be at least 1")
	case f.handoffs < 1:
		return f, errors.New("--handoffs must be at least 1")
	case f.duration <= 0:
		return f, errors.New("--duration must be positive")
	case f.outboxRecords < 1:
		return f, errors.New("--outbox-records must be at least 1")
	case f.outboxRate <= 0 || f.outboxTrickle <= 0 || f.outboxTrickleRecords() < 1:
		return f, errors.New("--outbox-rate and --outbox-trickle must make at least one record")
	case f.outboxIdle < 0:
		return f, errors.New("--outbox-idle must not be negative")
	case f.outboxMaxRecords < 0:
		return f, errors.New("--outbox-max-records must not be negative")
	case !slices.Contains(outboxStatsModes, f.outboxStats):
		return f, fmt.Errorf("--outbox-stats must be one of %s", strings.Join(outboxStatsModes, ", "))
	}
	var err error
	if f.cases, err = pickList("case", "--cases", *cases, kafkaCases); err != nil {
		return f, err
	}
	return f, nil
}

// outboxTrickleRecords is how many records the trickle sends.
func (f kafkaFlags) outboxTrickleRecords() int {
	return int(f.outboxRate * f.outboxTrickle.Seconds())
}

// hasOutbox reports whether an outbox case runs.
func (f kafkaFlags) hasOutbox() bool {
	return slices.Contains(f.cases, caseOutbox) || slices.Contains(f.cases, caseOutboxTrickle)
}

// settings describes the run's settings for the report.
func (f kafkaFlags) settings() string {
	where := "in-process kfake broker"
	if f.brokers != "" {
		where = "brokers " + f.brokers
	}
	s := fmt.Sprintf("%d records in %d partitions on %s, batch %d, %d handoff cycles per round, %d rounds",
		f.records, f.partitions, where, f.batch, f.handoffs, f.rounds)
	if f.hasOutbox() {
		txn := "the relay's default (1000)"
		if f.outboxMaxRecords > 0 {
			txn = fmt.Sprint(f.outboxMaxRecords)
		}
		s += fmt.Sprintf("; outbox: backlog of %d records (outbox tables' statistics: %s), trickle of %g records/s for %v, "+
			"idle window %v, records per Kafka transaction %s", f.outboxRecords, f.outboxStats, f.outboxRate, f.outboxTrickle, f.outboxIdle, txn)
	}
	return s
}
