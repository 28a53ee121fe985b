package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// The kafka suite's cases, in the order they run within a round.
var kafkaCases = []string{"noop", "one-row", "handoff"}

// kafkaFlags are the kafka suite's command-line settings.
type kafkaFlags struct {
	records    int
	partitions int
	rounds     int
	batch      int
	handoffs   int
	brokers    string
	duration   time.Duration
	jsonPath   string
	markdown   bool
	cases      []string
}

func parseKafkaFlags(args []string, stderr io.Writer) (kafkaFlags, error) {
	var f kafkaFlags
	fs := newSuiteFlags("kafka", stderr)
	fs.IntVar(&f.records, "records", 300000, "records in the topic (produced once, untimed); every throughput measurement consumes all of them")
	fs.IntVar(&f.partitions, "partitions", 16, "partitions of the topic (and of the leasehold group)")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds; the report gives medians over them")
	fs.IntVar(&f.batch, "batch", 500, "records per transaction at most (Config.MaxBatch; the raw system polls as many)")
	fs.IntVar(&f.handoffs, "handoffs", 4, "handoff case: join/leave cycles of a second worker per round")
	fs.StringVar(&f.brokers, "brokers", os.Getenv("KAFKA_BROKERS"), "Kafka seed brokers (comma-separated); empty runs an in-process kfake cluster")
	fs.DurationVar(&f.duration, "duration", 60*time.Second, "cap on each measurement (an error past it)")
	fs.StringVar(&f.jsonPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&f.markdown, "markdown", false, "print the tables as Markdown, with a line describing the machine and settings")
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
	}
	var err error
	if f.cases, err = pickList("case", "--cases", *cases, kafkaCases); err != nil {
		return f, err
	}
	return f, nil
}

// settings describes the run's settings for the report.
func (f kafkaFlags) settings() string {
	where := "in-process kfake broker"
	if f.brokers != "" {
		where = "brokers " + f.brokers
	}
	return fmt.Sprintf("%d records in %d partitions on %s, batch %d, %d handoff cycles per round, %d rounds",
		f.records, f.partitions, where, f.batch, f.handoffs, f.rounds)
}
