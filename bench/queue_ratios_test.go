package main

import (
	"io"
	"slices"
	"testing"
	"time"
)

// rates returns one sample per rate: that many jobs in a second.
func rates(xs ...int) []sample {
	var out []sample
	for _, x := range xs {
		out = append(out, sample{ops: x, elapsed: time.Second})
	}
	return out
}

// lats returns one sample per latency, holding only it (its p50 and p99).
func lats(xs ...time.Duration) []sample {
	var out []sample
	for _, x := range xs {
		out = append(out, sample{ops: 1, elapsed: time.Second, lat: []time.Duration{x}})
	}
	return out
}

func TestPairedRatios(t *testing.T) {
	// Paired round by round: 2/1, 6/6, 3/6. The ratio of the medians
	// (3/6) would differ from the median of the paired ratios (1).
	lh, river := rates(2, 6, 3), rates(1, 6, 6)
	got := pairedRatios(caseNoopBurndown, lh, river)
	if !slices.Equal(got, []float64{2, 1, 0.5}) {
		t.Fatalf("paired ratios %v, want [2 1 0.5]", got)
	}
	sp, ok := spreadOf(got)
	if !ok || sp != (Spread{Min: 0.5, Median: 1, Max: 2, Rounds: 3}) {
		t.Errorf("spread %+v %v", sp, ok)
	}
	if !sp.Straddles(1) || sp.Straddles(2) || sp.Straddles(0.5) || sp.Straddles(0.4) {
		t.Errorf("%+v: Straddles wrong", sp)
	}
	// An even count: the median is the mean of the middle two.
	if sp, _ := spreadOf([]float64{4, 1, 3, 2}); sp != (Spread{Min: 1, Median: 2.5, Max: 4, Rounds: 4}) {
		t.Errorf("even spread %+v", sp)
	}
	if _, ok := spreadOf(nil); ok {
		t.Error("a spread of no ratios")
	}
	// Latency cases are the peer's over leasehold's, so that above 1 favours
	// leasehold: idle-latency by p50, hol by p99.
	ms := time.Millisecond
	if got := pairedRatios(caseIdleLatency, lats(2*ms, 4*ms), lats(3*ms, 2*ms)); !slices.Equal(got, []float64{1.5, 0.5}) {
		t.Errorf("idle-latency ratios %v, want [1.5 0.5]", got)
	}
	if got := pairedRatios(caseHOL, lats(100*ms), lats(400*ms)); !slices.Equal(got, []float64{4}) {
		t.Errorf("hol ratios %v, want [4]", got)
	}
	// Only the rounds both have; a round whose divisor is 0 is left out.
	if got := pairedRatios(caseSteady, rates(4, 5, 6), rates(2, 0)); !slices.Equal(got, []float64{2}) {
		t.Errorf("uneven ratios %v, want [2]", got)
	}
	if got := selfRatios(rates(1, 3), rates(2, 4, 8)); !slices.Equal(got, []float64{0.5, 0.75}) {
		t.Errorf("self ratios %v, want [0.5 0.75]", got)
	}
}

func TestQueueReportSpread(t *testing.T) {
	f, err := parseQueueFlags([]string{"--cases", "noop-burndown,hot-key", "--systems", "leasehold,river", "--rounds", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	all := []*series{
		{system: sysQueueLeasehold, kase: caseNoopBurndown, samples: rates(200, 600, 300)},
		{system: sysQueueRiver, kase: caseNoopBurndown, samples: rates(100, 600, 600)},
		{system: sysQueueLeasehold, kase: caseHotKey, samples: rates(100, 600, 60)},
		{system: sysQueueRiver, kase: caseHotKey, samples: rates(100, 100, 100)},
	}
	rep := queueReport(f, all)
	if rep.Ratios[caseNoopBurndown] != 1 || rep.RatioSpread[caseNoopBurndown] != (Spread{0.5, 1, 2, 3}) {
		t.Errorf("noop-burndown ratio %v, spread %+v", rep.Ratios[caseNoopBurndown], rep.RatioSpread[caseNoopBurndown])
	}
	if rep.SelfRatios[selfHotKey] != 0.5 || rep.SelfRatioSpread[selfHotKey] != (Spread{0.2, 0.5, 1, 3}) {
		t.Errorf("self ratio %v, spread %+v", rep.SelfRatios, rep.SelfRatioSpread)
	}
	tables := queueTables(rep, all, []queueSystem{&lhSystem{}, &riverSystem{}})
	if len(tables) != 3 {
		t.Fatalf("%d tables, want results, ratios and self", len(tables))
	}
	row := tables[1].rows[0]
	if row[0] != caseNoopBurndown || row[1] != "1.00" || row[2] != "0.50–2.00" || row[4] != "BELOW TARGET; vs river: within the spread (min < 1 < max)" {
		t.Errorf("ratios row %q", row)
	}
	if row := tables[2].rows[0]; row[1] != "0.50" || row[4] != "ok; target within the spread" {
		t.Errorf("self row %q", row)
	}
}

func TestChooseVariants(t *testing.T) {
	a := &series{system: sysQueueRiver, kase: caseTxOneRow, variant: "MaxWorkers 2000", samples: rates(10, 30, 20)}
	b := &series{system: sysQueueRiver, kase: caseTxOneRow, variant: "MaxWorkers 16", samples: rates(25, 5, 25)}
	lh := &series{system: sysQueueLeasehold, kase: caseTxOneRow, samples: rates(1)}
	chosen, picked := chooseVariants([]*series{lh, a, b})
	if len(chosen) != 2 || chosen[0] != lh || chosen[1] != b || !picked[b] || picked[a] || !picked[lh] {
		t.Errorf("chose %v (picked %v); want leasehold and the variant of median 25", chosen, picked)
	}
}

func TestHolLatencies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ids := make([]int64, 201) // jobs 99 and 199 are slow
	for n := range ids {
		ids[n] = int64(1000 + n)
	}
	var done []completion
	for n := range 200 { // job 200 not completed: counted at the cut
		done = append(done, completion{ids[n], at(n + 1)})
	}
	lat, err := holLatencies(ids, done, t0, at(5000))
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 199 || lat[0] != time.Millisecond || lat[len(lat)-1] != 5*time.Second || slices.Contains(lat, 100*time.Millisecond) {
		t.Errorf("%d latencies, first %v, last %v; want 199 fast ones, the slow 100ms left out, the cut last", len(lat), lat[0], lat[len(lat)-1])
	}
	if _, err := holLatencies(ids, append(done, done[0]), t0, at(5000)); err == nil {
		t.Error("a job completed twice was accepted")
	}
	if _, err := holLatencies(ids, []completion{{7, at(1)}}, t0, at(5000)); err == nil {
		t.Error("a job not enqueued was accepted")
	}
}

func TestSlotCredit(t *testing.T) {
	b := newBurn(5, 1)
	b.track = true
	s := b.slots[0]
	t0 := time.Now().Add(-time.Second)
	s.fetched(t0, 2)
	s.fetched(t0.Add(500*time.Millisecond), 3)
	s.credit(3, []int64{1, 2, 3}) // both of the first fetch, one of the second
	s.credit(2, []int64{4, 5})
	select {
	case <-b.finished:
	default:
		t.Fatal("the burn did not finish")
	}
	lat := b.latencies()
	if len(lat) != 5 || lat[0] < 400*time.Millisecond || lat[2] > 700*time.Millisecond || lat[3] < time.Second {
		t.Errorf("latencies %v: want three from the second fetch (~0.5s), two from the first (~1s)", lat)
	}
	if c := b.completions(); len(c) != 5 || c[4].id != 5 {
		t.Errorf("completions %v", c)
	}
}
