package queue

import "time"

// Fair turns between the keys of a partition (see docs/control.md). The
// pipeline holds at most Window jobs, fetched in (priority, run_at, id)
// order: a key with a large backlog would fill the window with its own
// jobs, and the jobs of every other key, behind its backlog, would wait
// for it to drain. So a key holds at most its share of the window (share),
// whatever its backlog; once a key holds its share it is full: the fetch
// walks past its rows to find the keys behind it (queueFetchWalk), and
// reads the full key's next jobs by key, as it runs them (refill). The
// walk's position moves through the backlog once, not at every fetch:
// each row of a full key is walked past once per pass.
//
// The keys whose rows the walk passed are behind the walk's position: they
// are read by key until they have no due job left, and the position is
// kept only while some are. A job let go that the walk may have passed (a
// keyless job cooling after an unrecorded outcome) starts the walk again
// from the beginning, and so does every walkRenew: a job committed late
// (by a long transaction) with a run_at before the position is found then.

// walkRenew is how often, in PollIntervals, a kept walk starts again from
// the beginning.
const walkRenew = 30

// share is how many jobs of one key the pipeline holds at most: half the
// window (at least 1). With a key's concurrency at 1, one runs and the
// others wait their turn in its line, fetched ahead so that a key alone in
// its partition still costs a fetch per many jobs.
func (pl *pipeline) share() int { return max(pl.window/2, 1) }

// holding is how many jobs of ln's key wait their turn or run (those whose
// outcome is being recorded have had their turn: they do not count).
func holding(ln *line) int { return len(ln.queue) + ln.active() }

// fairTurns returns the fair part of the next fetch's ask (nil: no key is
// full, and the fetch is the member's common one), for a fetch of n jobs:
// the keys refilled take at most half of them (the rest is the walk's
// window, for the keys behind the full ones).
func (pl *pipeline) fairTurns(n int) *fairAsk {
	if pl.p.unfair {
		return nil
	}
	share := pl.share()
	for k, ln := range pl.lines {
		if holding(ln) >= share {
			pl.behind[k] = true
		}
	}
	if len(pl.behind) == 0 {
		if pl.walk.keep {
			pl.walk = walkPos{gen: pl.walk.gen} // no key is full any more: the walk starts again
		}
		return nil
	}
	if now := time.Now(); pl.walkFrom.IsZero() || now.Sub(pl.walkFrom) > walkRenew*pl.p.cfg.PollInterval {
		pl.walk, pl.walkFrom = walkPos{gen: pl.walk.gen}, now
	}
	// (Empty arrays, not nil: the statement takes NULL for nil.)
	a := &fairAsk{full: []string{}, refill: []string{}, counts: []int32{}, walk: fairWalk * n}
	// The refills take half the fetch (at least one job: a fetch of one job
	// refills), or all of it when the last walk found no other key's job.
	budget := max(n/2, 1)
	if pl.walkAlone {
		budget = n
	}
	for k := range pl.behind {
		a.full = append(a.full, k)
		ln := pl.lines[k]
		if _, skipped := pl.skip[k]; skipped || ln != nil && ln.stalled {
			continue
		}
		h := 0
		if ln != nil {
			h = holding(ln)
		}
		if c := min(share-h, budget); h <= share/2 && c > 0 {
			a.refill, a.counts = append(a.refill, k), append(a.counts, int32(c))
			budget -= c
		}
	}
	return a
}

// refilled takes in what a fair fetch read by key: a key that got no job,
// and does not wait, has no due job left behind the walk's position (one
// that got fewer than asked may have stopped at a job not due that holds
// the later ones: it is read again). It reports whether a key got all it
// asked for: it may have more, to read as soon as it runs low.
func (pl *pipeline) refilled(a *fairAsk, res fetchResult) (more bool) {
	if a == nil {
		return false
	}
	got := make(map[string]int, len(a.refill))
	for _, f := range res.jobs {
		got[f.key]++
	}
	for _, w := range res.waiting {
		got[w.key] = -1 // its next job is not due: it stays behind
	}
	for i, k := range a.refill {
		switch n := got[k]; {
		case n == 0:
			delete(pl.behind, k)
		case n >= int(a.counts[i]):
			more = true
		}
	}
	return more
}

// passed notes that the walk may have passed a job the pipeline let go
// (its key is read by key from now on; a keyless job starts the walk
// again from the beginning).
func (pl *pipeline) passed(key string) {
	if !pl.walk.keep {
		return
	}
	if key == "" {
		pl.walk = walkPos{gen: pl.walk.gen}
		return
	}
	pl.behind[key] = true
}

// began notes that f's run began (d 1) or ended (d -1), for the weights.
func (pl *pipeline) began(f fetched, d int) {
	if f.key == "" {
		pl.keyless += d
	} else if ln := pl.lines[f.key]; ln != nil {
		ln.started += d
	}
}

// lighter reports whether f's key runs fewer jobs per unit of weight than
// g's (ProcessorConfig.KeyWeight): f's job then starts first. Equal: no
// (the earlier in ready goes first).
func (pl *pipeline) lighter(f, g fetched) bool {
	fr, fw := pl.load(f.key)
	gr, gw := pl.load(g.key)
	return fr*gw < gr*fw // fr/fw < gr/gw
}

// load returns how many jobs of key run and its weight (keyless jobs: one
// key of weight 1).
func (pl *pipeline) load(key string) (running, weight int) {
	if key == "" {
		return pl.keyless, 1
	}
	ln := pl.lines[key]
	if ln == nil {
		return 0, 1
	}
	if ln.weight == 0 {
		ln.weight = max(pl.p.keyWeight(key), 1)
	}
	return ln.started, ln.weight
}
