package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// batchRatioTarget is the batch burn-down's target, over the plain one's.
const batchRatioTarget = 0.8

// batchReadTarget is the progress reads' target: the slowest under it.
const batchReadTarget = 20 * time.Millisecond

// batchMetric is one line of the main table: a value per round.
type batchMetric struct {
	name   string
	values []float64
	format func(float64) string
	target string
	ok     func(Spread) string // the verdict, "" for none
}

// batchMetrics returns the main table's lines from the rounds.
func batchMetrics(f batchFlags, rounds []batchRound) []batchMetric {
	n := f.items
	var submit, heap, base, bytes, fill, plain, batch, p50, p99, mx, f50, f99, fmx, load, pcpu, bcpu []float64
	for _, r := range rounds {
		submit = append(submit, r.submit.rate())
		heap = append(heap, mib(r.submit.peakHeap))
		base = append(base, mib(r.submit.baseHeap))
		bytes = append(bytes, r.submit.bytesPerItem())
		fill = append(fill, r.fill.rate())
		plain = append(plain, r.plainRate(n))
		batch = append(batch, r.batchRate(n))
		pcpu, bcpu = append(pcpu, perItemUS(r.plainCPU, n)), append(bcpu, perItemUS(r.batchCPU, n))
		l := summarizeLat(r.reads)
		p50, p99, mx = append(p50, ms(l.p50)), append(p99, ms(l.p99)), append(mx, ms(l.max))
		fl := summarizeLat(r.floor)
		f50, f99, fmx = append(f50, ms(fl.p50)), append(f99, ms(fl.p99)), append(fmx, ms(fl.max))
		load = append(load, max(r.load[0], r.load[1]))
	}
	ratio := func(s Spread) string {
		switch {
		case s.Median >= batchRatioTarget && s.Min >= batchRatioTarget:
			return "ok"
		case s.Straddles(batchRatioTarget):
			return "target within the spread"
		}
		return "BELOW TARGET"
	}
	read := func(s Spread) string {
		if s.Max < ms(batchReadTarget) {
			return "ok"
		}
		return "ABOVE TARGET"
	}
	return []batchMetric{
		{name: "submit: SubmitItems (SubmitChunk 1000), items/s", values: submit, format: f0},
		{name: "submit: producer peak heap in use, MiB", values: heap, format: f1},
		{name: "submit: producer heap before (after a GC), MiB", values: base, format: f1},
		{name: "submit: producer allocated, bytes/item", values: bytes, format: f0},
		{name: "plain backlog: EnqueueMany of " + strconv.Itoa(f.enqueueBatch) + ", jobs/s (reference)", values: fill, format: f0},
		{name: "burn-down: plain jobs, items/s", values: plain, format: f0},
		{name: "burn-down: batch items (SealedAt to FinishedAt), items/s", values: batch, format: f0},
		{name: "burn-down: batch / plain (paired per round)", values: ratios(batch, plain), format: f2,
			target: fmt.Sprintf(">= %.2f", batchRatioTarget), ok: ratio},
		{name: "burn-down: client CPU, plain, µs/item", values: pcpu, format: f1},
		{name: "burn-down: client CPU, batch, µs/item", values: bcpu, format: f1},
		{name: "progress read (Client.Batch): p50, ms", values: p50, format: f2},
		{name: "progress read: p99, ms", values: p99, format: f2},
		{name: "progress read: max, ms", values: mx, format: f2, target: fmt.Sprintf("< %v", batchReadTarget), ok: read},
		{name: "control read (SELECT 1 right after): p50, ms", values: f50, format: f2},
		{name: "control read: p99, ms", values: f99, format: f2},
		{name: "control read: max, ms", values: fmx, format: f2},
		{name: "machine load average (1 min) around the batch burn-down", values: load, format: f1},
	}
}

// batchTablesOf renders the report's tables.
func batchTablesOf(f batchFlags, rounds []batchRound, sweep map[int][]submitResult) []ptable {
	main := ptable{
		title:  fmt.Sprintf("batch: %d items, %d round(s): min, median and max over the rounds", f.items, len(rounds)),
		header: []string{"measure", "min", "median", "max", "each round", "target", "verdict"},
	}
	var order []string
	for i, r := range rounds {
		o := "plain, batch"
		if r.batchFirst {
			o = "batch, plain"
		}
		order = append(order, fmt.Sprintf("r%d %s", i+1, o))
	}
	reads := 0
	for _, r := range rounds {
		reads += len(r.reads)
	}
	main.notes = append(main.notes,
		"Burn-downs on an emptied jobs table each, order alternating: "+strings.Join(order, "; ")+".",
		fmt.Sprintf("Progress reads: %d in all, every %v on a pool of their own, during the batch burn-downs.", reads, f.readEvery))
	for _, m := range batchMetrics(f, rounds) {
		s, ok := spreadOf(m.values)
		if !ok {
			continue
		}
		each := make([]string, len(m.values))
		for i, v := range m.values {
			each[i] = m.format(v)
		}
		verdict := ""
		if m.ok != nil {
			verdict = m.ok(s)
		}
		main.add(m.name, m.format(s.Min), m.format(s.Median), m.format(s.Max), strings.Join(each, " "), m.target, verdict)
	}
	tables := []ptable{main}
	if len(sweep) > 0 {
		tables = append(tables, chunkTable(f, sweep))
	}
	return tables
}

// chunkTable renders the SubmitChunk sweep.
func chunkTable(f batchFlags, sweep map[int][]submitResult) ptable {
	t := ptable{
		title:  fmt.Sprintf("SubmitItems by SubmitChunk: %d items, %d round(s)", f.sweepItems, f.sweepRounds),
		header: []string{"SubmitChunk", "items/s min", "median", "max", "each round", "vs 1000 (paired median)", "min–max", "peak heap MiB", "bytes/item"},
	}
	rates := map[int][]float64{}
	for c, rs := range sweep {
		for _, r := range rs {
			rates[c] = append(rates[c], r.rate())
		}
	}
	for _, c := range slices.Sorted(func(yield func(int) bool) {
		for c := range sweep {
			if !yield(c) {
				return
			}
		}
	}) {
		s, _ := spreadOf(rates[c])
		var each []string
		var heap, bytes []float64
		for _, r := range sweep[c] {
			each = append(each, f0(r.rate()))
			heap = append(heap, mib(r.peakHeap))
			bytes = append(bytes, r.bytesPerItem())
		}
		vs, lo := "-", "-"
		if rs, ok := spreadOf(ratios(rates[c], rates[defaultSubmitChunk])); ok {
			vs, lo = f2(rs.Median), f2(rs.Min)+"–"+f2(rs.Max)
		}
		t.add(strconv.Itoa(c), f0(s.Min), f0(s.Median), f0(s.Max), strings.Join(each, " "), vs, lo, f1(median(heap)), f0(median(bytes)))
	}
	if best, over, ok := bestChunk(rates, defaultSubmitChunk); ok {
		t.notes = append(t.notes, fmt.Sprintf("Fastest by median: SubmitChunk %d, %.2fx the default (%d).", best, over, defaultSubmitChunk))
	}
	t.notes = append(t.notes, "Chunk sizes run in a rotating order per round, each on an emptied jobs table.")
	return t
}

// batchDoc is the suite's generated section of a Markdown document.
func batchDoc(machine string, f batchFlags, tables []ptable) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", machine)
	fmt.Fprintf(&b, "Command: `go run . batch --items %d --rounds %d --sweep-items %d --sweep-rounds %d`.\n\n",
		f.items, f.rounds, f.sweepItems, f.sweepRounds)
	for _, t := range tables {
		t.markdown(&b)
	}
	return b.String()
}

// batchJSON is the suite's --json report.
type batchJSON struct {
	Suite  string          `json:"suite"`
	Items  int             `json:"items"`
	Rounds int             `json:"rounds"`
	Server ServerSettings  `json:"server"`
	Values map[string]any  `json:"values"` // per measure: min, median, max and each round
	Sweep  []batchSweepRow `json:"sweep,omitempty"`
}

// batchSweepRow is one SubmitChunk's submission rates.
type batchSweepRow struct {
	Chunk      int       `json:"chunk"`
	Items      int       `json:"items"`
	ItemsPerS  []float64 `json:"items_per_sec"`
	PeakHeapMB []float64 `json:"peak_heap_mib"`
	BytesItem  []float64 `json:"bytes_per_item"`
}

func batchJSONOf(f batchFlags, server ServerSettings, rounds []batchRound, sweep map[int][]submitResult) batchJSON {
	out := batchJSON{Suite: "batch", Items: f.items, Rounds: len(rounds), Server: server, Values: map[string]any{}}
	for _, m := range batchMetrics(f, rounds) {
		s, _ := spreadOf(m.values)
		out.Values[m.name] = map[string]any{"spread": s, "rounds": m.values}
	}
	for _, c := range f.chunks {
		row := batchSweepRow{Chunk: c, Items: f.sweepItems}
		for _, r := range sweep[c] {
			row.ItemsPerS = append(row.ItemsPerS, r.rate())
			row.PeakHeapMB = append(row.PeakHeapMB, mib(r.peakHeap))
			row.BytesItem = append(row.BytesItem, r.bytesPerItem())
		}
		if len(row.ItemsPerS) > 0 {
			out.Sweep = append(out.Sweep, row)
		}
	}
	return out
}
