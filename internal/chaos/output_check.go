package chaos

import (
	"fmt"
	"sort"
)

// OutputRun is what the kafka-out workload's checks read besides the
// ledger: its output topic as read back at the end, and the counts of the
// relays' own history events.
type OutputRun struct {
	// Records are the output topic's records that a read_committed reader
	// reads (committed transactions only), in any order.
	Records []OutputRecord
	// Uncommitted counts the records that a read_uncommitted reader reads:
	// also those of aborted transactions (a relay fenced, killed or failed
	// mid-transaction). Reported, not checked.
	Uncommitted int
	// Refused counts the transactional producers (a transactional id at
	// one epoch) whose requests Kafka refused because a newer producer of
	// the id had fenced them: stale relays' transactions refused, as seen
	// on the broker's side; RefusedRequests counts the requests.
	// Reported, not checked.
	Refused, RefusedRequests int
	// RefusedBy counts the refused requests by name ("EndTxn (commit)",
	// "AddOffsetsToTxn", "Produce", ...).
	RefusedBy map[string]int
}

// OutputRecord is one record of the output topic.
type OutputRecord struct {
	// Partition and Offset place the record in the output topic.
	Partition int32
	Offset    int64
	// Key is the record's key: the key of the input record it was made
	// from (Job.Key).
	Key string
	// Input is the id of the input record it was made from (Job.ID, read
	// from the record's value); -1 if the value names none.
	Input int64
}

// checkOutput checks the kafka-out workload's output (see Check): each
// input record's output exactly once (OutputDuplicates, OutputMissing),
// under the input's key, naming an input of the run (OutputForeign), and
// a key's outputs in input order (OutputReordered: counting each input's
// first output only, and a key whose outputs are spread over several
// output partitions, which have no order between them). jobs are the input
// records.
func checkOutput(out *OutputRun, jobs []Job, r *Result, flag func(string, ...any)) {
	r.Outputs = len(out.Records)
	r.OutputsUncommitted = out.Uncommitted
	r.RelayRefused, r.RelayRefusedRequests, r.RelayRefusedBy = out.Refused, out.RefusedRequests, out.RefusedBy
	recs := append([]OutputRecord(nil), out.Records...)
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	inputs := make(map[int64]Job, len(jobs))
	for _, j := range jobs {
		inputs[j.ID] = j
	}
	byInput := map[int64][]OutputRecord{}
	for _, o := range recs {
		j, ok := inputs[o.Input]
		switch {
		case !ok:
			r.OutputForeign++
			flag("output %d/%d (key %q): names no input record of the run (%d)", o.Partition, o.Offset, o.Key, o.Input)
			continue
		case o.Key != j.Key:
			r.OutputForeign++
			flag("output %d/%d: input %d under key %q, the input's key is %q", o.Partition, o.Offset, o.Input, o.Key, j.Key)
		}
		byInput[o.Input] = append(byInput[o.Input], o)
	}
	for _, j := range jobs {
		switch outs := byInput[j.ID]; {
		case len(outs) == 0:
			r.OutputMissing++
			flag("input %d (key %s): no output published (read_committed)", j.ID, j.Key)
		case len(outs) > 1:
			r.OutputDuplicates++
			r.OutputExtra += len(outs) - 1
			at := ""
			for i, o := range outs {
				if i > 0 {
					at += ", "
				}
				at += fmt.Sprintf("%d/%d", o.Partition, o.Offset)
			}
			flag("input %d (key %s): output published %d times (at %s)", j.ID, j.Key, len(outs), at)
		}
	}

	// Order per key: the first output of each input, in log order, names
	// inputs in increasing order (input ids increase with the input's
	// offset), all in one output partition.
	type place struct {
		partition int32
		input     int64
	}
	last := map[string]place{}
	seen := map[int64]bool{}
	for _, o := range recs {
		if _, ok := inputs[o.Input]; !ok || seen[o.Input] {
			continue
		}
		seen[o.Input] = true
		l, ok := last[o.Key]
		switch {
		case ok && l.partition != o.Partition:
			r.OutputReordered++
			flag("output %d/%d: key %s published to partitions %d and %d (no order between them)",
				o.Partition, o.Offset, o.Key, l.partition, o.Partition)
			last[o.Key] = place{o.Partition, o.Input}
		case ok && o.Input < l.input:
			r.OutputReordered++
			flag("output %d/%d: key %s input %d published after input %d", o.Partition, o.Offset, o.Key, o.Input, l.input)
		default:
			last[o.Key] = place{o.Partition, o.Input}
		}
	}
}

// countRelayEvents counts the relays' history events (kafka-out).
func countRelayEvents(events []Event, r *Result) {
	for _, ev := range events {
		switch {
		case ev.Type == EventRelay && ev.Outcome == RelayPublished:
			r.RelayTransactions++
		case ev.Type == EventRelay && ev.Outcome == RelayFenced:
			r.RelayFenced++
		case ev.Type == EventRelay && ev.Outcome == RelayFailed:
			r.RelayFailed++
		case ev.Type == EventRelayKill:
			r.RelayKills++
		case ev.Type == EventRelayPause:
			r.RelayPauses++
		}
	}
}
