package chaos

import (
	"strings"
	"testing"
)

// validKafka is a Kafka run: partition 0 holds offsets 0..2, partition 1
// offset 0, partition 2 nothing; partition 0 changed hands (token 1 to 2)
// after offset 0, and the old owner's late batch commit was refused.
func validKafka() (log []kafkaRecord, ledger []kafkaEntry, stored, ends map[int32]int64, events []Event) {
	log = []kafkaRecord{{0, 0}, {0, 1}, {0, 2}, {1, 0}}
	ledger = []kafkaEntry{
		{N: 1, Topic: kafkaTopic, Partition: 0, Offset: 0, Token: 1, Worker: "w0"},
		{N: 2, Topic: kafkaTopic, Partition: 1, Offset: 0, Token: 5, Worker: "w1"},
		{N: 3, Topic: kafkaTopic, Partition: 0, Offset: 1, Token: 2, Worker: "w1"},
		{N: 4, Topic: kafkaTopic, Partition: 0, Offset: 2, Token: 2, Worker: "w1"},
	}
	stored = map[int32]int64{0: 3, 1: 1}
	ends = map[int32]int64{0: 3, 1: 1, 2: 0}
	events = []Event{
		{Type: EventCommit, Outcome: "completed"},
		{Type: EventCommit, Outcome: "fenced"},
		{Type: EventCommit, Outcome: "completed"},
		{Type: EventCommit, Outcome: "completed"},
	}
	return log, ledger, stored, ends, events
}

func kafkaCheck(log []kafkaRecord, ledger []kafkaEntry, stored, ends map[int32]int64, events []Event) Result {
	in := kafkaInput(kafkaTopic, log, ledger, stored, ends)
	for _, r := range log {
		in.Confirmed = append(in.Confirmed, recordID(r.Partition, r.Offset))
	}
	in.Events = events
	return Check(in)
}

func TestKafkaCheckPassesAValidRun(t *testing.T) {
	r := kafkaCheck(validKafka())
	if r.Verdict != VerdictPass || len(r.Violations) != 0 {
		t.Fatalf("valid run: %+v", r)
	}
	if r.Jobs != 4 || r.Applied != 4 || r.StaleRefused != 1 || r.Commits != 4 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestKafkaCheckWithoutRefusalsIsInconclusive(t *testing.T) {
	log, ledger, stored, ends, events := validKafka()
	if r := kafkaCheck(log, ledger, stored, ends, events[:1]); r.Verdict != VerdictInconclusive {
		t.Fatalf("no refusal: verdict %q; want inconclusive", r.Verdict)
	}
}

// Negative controls for the Kafka workload: each breaks one invariant,
// which must be flagged with its count and fail the run.
func TestKafkaCheckFlagsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(log *[]kafkaRecord, ledger *[]kafkaEntry, stored, ends map[int32]int64)
		count  func(Result) int
		want   string
	}{
		{"duplicate", func(_ *[]kafkaRecord, l *[]kafkaEntry, _, _ map[int32]int64) {
			*l = append(*l, kafkaEntry{N: 5, Topic: kafkaTopic, Partition: 1, Offset: 0, Token: 5, Worker: "w2"})
		}, func(r Result) int { return r.Duplicates }, "applied 2 times"},
		{"gap: an offset stored past without its row", func(_ *[]kafkaRecord, l *[]kafkaEntry, _, _ map[int32]int64) {
			*l = append((*l)[:2], (*l)[3])
		}, func(r Result) int { return r.Lost }, "completed without its effect"},
		{"unconsumed records", func(_ *[]kafkaRecord, l *[]kafkaEntry, stored, _ map[int32]int64) {
			*l = (*l)[:3]
			stored[0] = 2
		}, func(r Result) int { return r.Unfinished }, "still pending"},
		{"acknowledged record missing from the log", func(log *[]kafkaRecord, l *[]kafkaEntry, stored, ends map[int32]int64) {
			*log = (*log)[:3] // partition 1's record was acknowledged, the log lacks it
			*l = append((*l)[:1], (*l)[2:]...)
			delete(stored, 1)
			ends[1] = 0
		}, func(r Result) int { return r.Lost }, "missing from the jobs table or the topic's log"},
		{"out of order", func(_ *[]kafkaRecord, l *[]kafkaEntry, _, _ map[int32]int64) {
			(*l)[2].N, (*l)[3].N = 4, 3 // offset 2 numbered before offset 1
		}, func(r Result) int { return r.OrderViolations }, "applied after job"},
		{"stale commit accepted", func(_ *[]kafkaRecord, l *[]kafkaEntry, _, _ map[int32]int64) {
			(*l)[3].Token = 1 // the old owner's batch landed after the new owner's
		}, func(r Result) int { return r.StaleAccepted }, "stale write accepted"},
		{"offset short of the log end", func(log *[]kafkaRecord, l *[]kafkaEntry, _, ends map[int32]int64) {
			*log = append(*log, kafkaRecord{1, 1})
			*l = append(*l, kafkaEntry{N: 5, Topic: kafkaTopic, Partition: 1, Offset: 1, Token: 5, Worker: "w1"})
			ends[1] = 2 // applied, but the offset advance was lost
		}, func(r Result) int { return r.OffsetMismatches }, "stored offset 1, its log ends at 2"},
		{"no stored offset", func(_ *[]kafkaRecord, _ *[]kafkaEntry, stored, _ map[int32]int64) {
			delete(stored, 0)
		}, func(r Result) int { return r.OffsetMismatches }, "has no stored offset"},
		{"foreign topic", func(_ *[]kafkaRecord, l *[]kafkaEntry, _, _ map[int32]int64) {
			*l = append(*l, kafkaEntry{N: 5, Topic: "other", Partition: 1, Offset: 0, Token: 5})
		}, func(r Result) int { return r.Foreign }, "not a job of the run"},
	} {
		log, ledger, stored, ends, events := validKafka()
		tc.change(&log, &ledger, stored, ends)
		in := kafkaInput(kafkaTopic, log, ledger, stored, ends)
		in.Events = events
		for _, r := range []kafkaRecord{{0, 0}, {0, 1}, {0, 2}, {1, 0}} {
			in.Confirmed = append(in.Confirmed, recordID(r.Partition, r.Offset))
		}
		r := Check(in)
		if r.Verdict != VerdictFail || tc.count(r) == 0 || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: verdict %q, count %d, violations %q; want fail mentioning %q",
				tc.name, r.Verdict, tc.count(r), r.Violations, tc.want)
		}
	}
}

func TestRecordIDKeepsPartitionOrder(t *testing.T) {
	if recordID(0, 999_999_999) >= recordID(1, 0) || recordID(3, 5) != 3_000_000_005 {
		t.Fatal("recordID does not read as partition and offset")
	}
}
