package chaos

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// validKafkaOut is a kafka-out run: validKafka's input records and
// ledger, and their outputs (each input partition's key in one output
// partition, in input order; the outputs of two keys interleaved in
// output partition 0), with a stale relay's aborted record seen only by a
// read_uncommitted reader.
func validKafkaOut() (log []kafkaRecord, ledger []kafkaEntry, stored, ends map[int32]int64, events []Event, out *OutputRun) {
	log, ledger, stored, ends, events = validKafka()
	k0, k1 := partitionKey(kafkaTopic, 0), partitionKey(kafkaTopic, 1)
	out = &OutputRun{Records: []OutputRecord{
		{Partition: 0, Offset: 0, Key: k0, Input: recordID(0, 0)},
		{Partition: 0, Offset: 1, Key: k1, Input: recordID(1, 0)},
		{Partition: 0, Offset: 3, Key: k0, Input: recordID(0, 1)}, // offset 2: the aborted record, offset 4 its abort marker
		{Partition: 0, Offset: 5, Key: k0, Input: recordID(0, 2)},
	}, Uncommitted: 5, Refused: 1, RefusedRequests: 2}
	events = append(events,
		Event{Type: EventRelay, Outcome: RelayPublished, Partition: 0, Token: 1},
		Event{Type: EventRelayPause, Partition: 0},
		Event{Type: EventRelay, Outcome: RelayPublished, Partition: 1, Token: 5},
		Event{Type: EventRelay, Outcome: RelayPublished, Partition: 0, Token: 2},
		Event{Type: EventRelayKill, Partition: 0, Token: 2},
		Event{Type: EventRelay, Outcome: RelayFenced},
	)
	return log, ledger, stored, ends, events, out
}

func kafkaOutInput(log []kafkaRecord, ledger []kafkaEntry, stored, ends map[int32]int64, events []Event, out *OutputRun) Input {
	in := kafkaInput(kafkaTopic, log, ledger, stored, ends)
	for _, r := range log {
		in.Confirmed = append(in.Confirmed, recordID(r.Partition, r.Offset))
	}
	in.Events, in.Output = events, out
	return in
}

func TestKafkaOutCheckPassesAValidRun(t *testing.T) {
	r := Check(kafkaOutInput(validKafkaOut()))
	if r.Verdict != VerdictPass || len(r.Violations) != 0 {
		t.Fatalf("valid run: %+v", r)
	}
	if r.Outputs != 4 || r.OutputsUncommitted != 5 || r.RelayRefused != 1 || r.RelayRefusedRequests != 2 ||
		r.RelayTransactions != 3 || r.RelayFenced != 1 || r.RelayKills != 1 || r.RelayPauses != 1 || r.Commits != 4 {
		t.Fatalf("counts: %+v", r)
	}
}

// Negative controls for the output: each breaks one invariant, which must
// be flagged with its count and fail the run (the ledger and the input
// stay valid).
func TestKafkaOutCheckFlagsEachOutputViolation(t *testing.T) {
	k0, k1 := partitionKey(kafkaTopic, 0), partitionKey(kafkaTopic, 1)
	for _, tc := range []struct {
		name   string
		change func(out *OutputRun)
		count  func(Result) int
		want   string
	}{
		{"duplicate: published again by a stale relay", func(out *OutputRun) {
			out.Records = append(out.Records, OutputRecord{Partition: 0, Offset: 6, Key: k0, Input: recordID(0, 1)})
		}, func(r Result) int { return r.OutputDuplicates }, "output published 2 times (at 0/3, 0/6)"},
		{"duplicate, back to back", func(out *OutputRun) {
			out.Records = append(out.Records, OutputRecord{Partition: 0, Offset: 4, Key: k0, Input: recordID(0, 1)})
		}, func(r Result) int { return r.OutputExtra }, "output published 2 times"},
		{"missing: an input without output", func(out *OutputRun) {
			out.Records = append(out.Records[:1], out.Records[2:]...) // input 1/0's output lost
		}, func(r Result) int { return r.OutputMissing }, "input 1000000000 (key chaos/1): no output published"},
		{"missing: the output topic empty", func(out *OutputRun) {
			out.Records = nil
		}, func(r Result) int { return r.OutputMissing }, "no output published"},
		{"reordered within a key", func(out *OutputRun) {
			out.Records[2].Offset, out.Records[3].Offset = 5, 3 // input 0/2's output before 0/1's
		}, func(r Result) int { return r.OutputReordered }, "input 1 published after input 2"},
		{"a key split over two output partitions", func(out *OutputRun) {
			out.Records[3].Partition = 2
		}, func(r Result) int { return r.OutputReordered }, "published to partitions 0 and 2"},
		{"foreign: names no input of the run", func(out *OutputRun) {
			out.Records = append(out.Records, OutputRecord{Partition: 1, Offset: 0, Key: k1, Input: recordID(1, 7)})
		}, func(r Result) int { return r.OutputForeign }, "names no input record of the run"},
		{"foreign: a value that names nothing", func(out *OutputRun) {
			out.Records = append(out.Records, OutputRecord{Partition: 1, Offset: 0, Key: k1, Input: -1})
		}, func(r Result) int { return r.OutputForeign }, "names no input record of the run (-1)"},
		{"foreign: under another key", func(out *OutputRun) {
			out.Records[1].Key = k0
		}, func(r Result) int { return r.OutputForeign }, `the input's key is "chaos/1"`},
	} {
		log, ledger, stored, ends, events, out := validKafkaOut()
		tc.change(out)
		r := Check(kafkaOutInput(log, ledger, stored, ends, events, out))
		if r.Verdict != VerdictFail || tc.count(r) == 0 || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: verdict %q, count %d, violations %q; want fail mentioning %q",
				tc.name, r.Verdict, tc.count(r), r.Violations, tc.want)
		}
		if r.Duplicates+r.Lost+r.OrderViolations+r.StaleAccepted != 0 {
			t.Errorf("%s: the ledger was flagged too: %q", tc.name, r.Violations)
		}
	}
}

// A re-send after the first outputs (the control's duplicates) is a
// duplicate, not a reordering: only each input's first output counts for
// the order.
func TestKafkaOutCheckOrdersFirstOutputsOnly(t *testing.T) {
	log, ledger, stored, ends, events, out := validKafkaOut()
	k0 := partitionKey(kafkaTopic, 0)
	out.Records = append(out.Records,
		OutputRecord{Partition: 0, Offset: 6, Key: k0, Input: recordID(0, 0)},
		OutputRecord{Partition: 0, Offset: 7, Key: k0, Input: recordID(0, 1)})
	r := Check(kafkaOutInput(log, ledger, stored, ends, events, out))
	if r.OutputDuplicates != 2 || r.OutputExtra != 2 || r.OutputReordered != 0 {
		t.Fatalf("re-sent outputs: %d duplicates, %d extra, %d reordered; want 2, 2, 0: %q",
			r.OutputDuplicates, r.OutputExtra, r.OutputReordered, r.Violations)
	}
}

// Without an output (the other workloads), nothing of it is checked.
func TestCheckWithoutOutputIgnoresIt(t *testing.T) {
	r := kafkaCheck(validKafka())
	if r.Verdict != VerdictPass || r.Outputs+r.OutputMissing != 0 {
		t.Fatalf("no output: %+v", r)
	}
}

// An output record's value is its input's record id.
func TestOutputRecordReadsTheInput(t *testing.T) {
	for value, want := range map[string]int64{"3000000005": recordID(3, 5), "x": -1, "": -1, "-4": -1} {
		if got := outputRecord(&kgo.Record{Key: []byte("k"), Value: []byte(value)}).Input; got != want {
			t.Errorf("value %q: input %d, want %d", value, got, want)
		}
	}
}
