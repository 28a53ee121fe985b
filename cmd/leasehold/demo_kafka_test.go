package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestKafkaDemo(t *testing.T) {
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var story bytes.Buffer
	rep, err := runKafkaDemo(ctx, demoConfig{DatabaseURL: url, Out: &story})
	t.Logf("story:\n%s", story.String())
	if err != nil {
		t.Fatalf("runKafkaDemo: %v", err)
	}
	if !rep.OK || len(rep.Violations) > 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
	if rep.Records != 2*kafkaDemoRecords || rep.Applied != rep.Records || rep.Lost != 0 || rep.Duplicates != 0 {
		t.Errorf("records %d, applied %d, lost %d, duplicates %d", rep.Records, rep.Applied, rep.Lost, rep.Duplicates)
	}
	if rep.FencedRefused != 1 || rep.OffsetsAtLogEnd != kafkaDemoPartitions {
		t.Errorf("fenced %d, offsets at end %d", rep.FencedRefused, rep.OffsetsAtLogEnd)
	}
	if rep.FailoverMS < kafkaDemoTTL.Milliseconds()/2 {
		t.Errorf("failover %d ms: faster than the lease could have expired", rep.FailoverMS)
	}
	if !strings.Contains(story.String(), "REFUSED by the fence") {
		t.Errorf("the story does not tell the refusal")
	}
	var n int
	if err := pgtest.PoolURL(t, url).QueryRow(ctx,
		"SELECT count(*) FROM pg_tables WHERE schemaname = 'leasehold_demo' AND tablename LIKE 'demo_%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d demo tables left behind", n)
	}
}

func TestKafkaDemoCommandJSON(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.URL(t))
	out, err := run(t, "demo", "--kafka", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n") // run merges the story (stderr) into out
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"records", "applied", "duplicates", "lost", "fenced_refused", "failover_ms", "ok"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
}

func TestKafkaReportViolations(t *testing.T) {
	good := kafkaReport{Records: 2, Applied: 2, Partitions: 2, OffsetsAtLogEnd: 2, FencedRefused: 1}
	good.check()
	if !good.OK {
		t.Fatalf("good report: %v", good.Violations)
	}
	for name, mut := range map[string]func(*kafkaReport){
		"duplicate":   func(r *kafkaReport) { r.Duplicates = 1 },
		"lost":        func(r *kafkaReport) { r.Lost = 1 },
		"order":       func(r *kafkaReport) { r.OutOfOrder = 1 },
		"offsets":     func(r *kafkaReport) { r.OffsetsAtLogEnd = 1 },
		"not refused": func(r *kafkaReport) { r.FencedRefused = 0 },
	} {
		r := good
		mut(&r)
		r.check()
		if r.OK {
			t.Errorf("%s: no violation found", name)
		}
	}
}
