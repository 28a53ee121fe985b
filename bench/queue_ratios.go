package main

import (
	"slices"
)

// The queue suite compares systems round by round: round i of leasehold
// against round i of a peer, measured minutes apart on the same server, so
// that a disturbance that slows a whole round (autovacuum, the machine's
// other work) cancels out of the ratio. The report gives the median of the
// per-round ratios with their min and max.

// selfHotKey names leasehold's hot-key rate over its noop-burndown rate in
// the same round.
const selfHotKey = caseHotKey + "/" + caseNoopBurndown

// selfHotKeyTarget is that ratio's target: a backlog of one key burns down
// at least half as fast as one spread over many.
const selfHotKeyTarget = 0.5

// roundRatio returns the ratio of round a of leasehold over round b of a
// peer in case c, oriented so that above 1 favours leasehold: jobs/s over
// jobs/s; idle-latency: peer p50 over leasehold p50; hol: peer p99 over
// leasehold p99. ok is false when the divisor is 0.
func roundRatio(c string, lh, peer sample) (r float64, ok bool) {
	var num, den float64
	switch c {
	case caseIdleLatency:
		num, den = ms(peer.quantile(0.5)), ms(lh.quantile(0.5))
	case caseHOL, caseFair:
		num, den = ms(peer.quantile(0.99)), ms(lh.quantile(0.99))
	default:
		num, den = lh.rate(), peer.rate()
	}
	if den <= 0 {
		return 0, false
	}
	return num / den, true
}

// pairedRatios returns the per-round ratios of case c (see roundRatio),
// leasehold's round i against the peer's round i, over the rounds both
// have.
func pairedRatios(c string, lh, peer []sample) []float64 {
	var out []float64
	for i := range min(len(lh), len(peer)) {
		if r, ok := roundRatio(c, lh[i], peer[i]); ok {
			out = append(out, r)
		}
	}
	return out
}

// limitsTarget is leasehold+limits over leasehold's target in every case
// (see roundRatio: above 1 favours leasehold+limits): declaring limits
// that never bind costs at most 5%.
const limitsTarget = 0.95

// limitsRatioName names leasehold+limits over leasehold in case c among
// the report's self ratios.
func limitsRatioName(c string) string { return sysQueueLimits + "/" + sysQueueLeasehold + " " + c }

// selfRatios returns, round by round, the rate of num over the rate of den
// (two cases of one system).
func selfRatios(num, den []sample) []float64 {
	var out []float64
	for i := range min(len(num), len(den)) {
		if d := den[i].rate(); d > 0 {
			out = append(out, num[i].rate()/d)
		}
	}
	return out
}

// spreadOf returns the min, median and max of xs; ok is false for none.
func spreadOf(xs []float64) (s Spread, ok bool) {
	if len(xs) == 0 {
		return Spread{}, false
	}
	return Spread{Min: slices.Min(xs), Median: median(xs), Max: slices.Max(xs), Rounds: len(xs)}, true
}

// chooseVariants returns one series per system and case, in the order of
// all: the only one, or of a system's variants in a case the one with the
// highest median rate (the peer's best showing), and marks which it chose.
func chooseVariants(all []*series) (chosen []*series, picked map[*series]bool) {
	best := map[[2]string]*series{}
	for _, s := range all {
		k := [2]string{s.system, s.kase}
		if b, ok := best[k]; !ok || s.result().JobsPerSec > b.result().JobsPerSec {
			best[k] = s
		}
	}
	picked = map[*series]bool{}
	for _, s := range all {
		if best[[2]string{s.system, s.kase}] == s {
			chosen = append(chosen, s)
			picked[s] = true
		}
	}
	return chosen, picked
}
