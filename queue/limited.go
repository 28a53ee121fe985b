package queue

import (
	"cmp"
	"slices"
	"sync/atomic"
	"time"
)

// The keys held back by their limits, as the pipeline sees them: shown by
// `leasehold status`, the web UI's group page and the metrics (see
// docs/control.md). The pipeline takes a snapshot at most every
// PollInterval, and the running set carries it to the member's publisher,
// which writes it with the running jobs (no statement of its own).

// Limit names what holds a job back.
type Limit string

const (
	// LimitKeyConcurrency: as many jobs of its key run as its key limit
	// allows (Policy.KeyConcurrency, Job.KeyConcurrency).
	LimitKeyConcurrency Limit = "key_concurrency"
	// LimitKeyRate: its key's starts in the last period are at the
	// kind's Policy.KeyRate.
	LimitKeyRate Limit = "key_rate"
	// LimitGroupConcurrency: every slot of its kind is taken
	// (Policy.GroupConcurrency).
	LimitGroupConcurrency Limit = "group_concurrency"
)

// Limits lists every Limit, in the order reports show them.
var Limits = []Limit{LimitKeyConcurrency, LimitKeyRate, LimitGroupConcurrency}

// LimitedKey is a key whose jobs wait behind a limit: held by the
// partition's owner, due, not started.
type LimitedKey struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"` // the kind of its next job
	Limit   Limit  `json:"limit"`
	Waiting int    `json:"waiting"` // its jobs held back
}

// maxLimitedKeys bounds the keys a partition's snapshot names: those with
// the most jobs waiting.
const maxLimitedKeys = 20

// limitedCounts are a Processor's jobs held back now, by Limit, over all
// its partitions (the metrics' gauge).
type limitedCounts [3]atomic.Int64

func (c *limitedCounts) add(l Limit, n int64) {
	c[slices.Index(Limits, l)].Add(n)
}

// Limited returns how many jobs the Processor's partitions hold back now,
// by the limit they wait behind (as of each partition's last snapshot,
// taken at most every PollInterval).
func (p *Processor) Limited() map[Limit]int64 {
	out := make(map[Limit]int64, len(Limits))
	for i, l := range Limits {
		out[l] = p.heldBack[i].Load()
	}
	return out
}

// snapshotLimits takes the pipeline's snapshot of the keys held back: a
// key's jobs queued in its line wait for its key limit; its ready jobs
// that may not start wait for their rate or their kind's slots. It moves
// the Processor's counts by the change since the last snapshot, and hands
// the busiest keys to the running set.
func (pl *pipeline) snapshotLimits() {
	var keys []LimitedKey
	for k, ln := range pl.lines {
		// A key's jobs waiting their turn are held back by its limit
		// only if one is declared: by default a key's jobs run one at a
		// time, in order, which is not a limit but the key's meaning.
		if n := len(ln.queue); n > 0 && !ln.stalled && pl.p.keyLimitDeclared(ln.queue[0]) {
			keys = append(keys, LimitedKey{Key: k, Kind: ln.queue[0].kind, Limit: LimitKeyConcurrency, Waiting: n})
		}
	}
	byKey := make(map[[2]string]int) // index in keys
	now := time.Now()
	for _, f := range pl.ready {
		var l Limit
		if _, waiting := pl.slotWait[f.kind]; waiting {
			l = LimitGroupConcurrency
		} else if pl.rates.wait(f, pl.p.keyRate(f), now) > 0 {
			l = LimitKeyRate
		} else {
			continue
		}
		id := [2]string{f.key, string(l)}
		if i, ok := byKey[id]; ok {
			keys[i].Waiting++
			continue
		}
		byKey[id] = len(keys)
		keys = append(keys, LimitedKey{Key: f.key, Kind: f.kind, Limit: l, Waiting: 1})
	}
	var counts [3]int64
	for _, lk := range keys {
		counts[slices.Index(Limits, lk.Limit)] += int64(lk.Waiting)
	}
	for i := range counts {
		if d := counts[i] - pl.limitedCounts[i]; d != 0 {
			pl.p.heldBack[i].Add(d)
		}
	}
	pl.limitedCounts = counts
	slices.SortFunc(keys, func(a, b LimitedKey) int {
		return cmp.Or(cmp.Compare(b.Waiting, a.Waiting), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Limit, b.Limit))
	})
	if pl.set != nil {
		pl.set.setLimited(keys[:min(len(keys), maxLimitedKeys)])
	}
}

// forgetLimits takes the pipeline's counts out of the Processor's (its run
// ended).
func (pl *pipeline) forgetLimits() {
	for i, n := range pl.limitedCounts {
		pl.p.heldBack[i].Add(-n)
	}
	pl.limitedCounts = [3]int64{}
}
