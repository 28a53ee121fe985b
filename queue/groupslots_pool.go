package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// slotPool is one limited kind's slots in one group, as this Processor
// holds them. Its loop runs while it holds a slot or takes miss (demand),
// and is the only one to run statements for it: one acquire of all the
// slots it wants per attempt, one release of all it gives up at once.
//
// Demand: a take that misses waits for the next slotsChanged, so the takes
// missed since the last broadcast are the jobs waiting (one per pipeline:
// its later jobs of the kind wait behind the first). While they wait, the
// loop tries to acquire that many free slots, 5ms after the first miss,
// then backing off from pollMin to pollMax, and also just after each
// boundary of the turns (a multiple of turn on the wall clock), when
// slots are given up: a worker that lost more boundaries in a row tries
// earlier there, and polls more often between them (pollMax halved per
// boundary lost, down to an eighth), so the slots go round the waiting
// workers in turn.
//
// Giving up: a free slot no take used for idle, and every slot at the end
// of its turn (the first boundary at least turn/2 after its grant), even
// while its worker has jobs waiting; that worker then waits a moment
// before it tries again (cooldown), so that the others try first.
type slotPool struct {
	st          *slotState
	gs          *slotGroups
	group, kind string
	names       []string // the slots' lease names

	// Under st.mu: held are the grants held, by slot; free those no job
	// runs on; waiting counts the takes missed since the last broadcast,
	// the last at lastMiss; running says the loop runs; kick wakes it.
	held     map[int]*slotGrant
	free     []*slotGrant
	waiting  int
	lastMiss time.Time
	running  bool
	kick     chan struct{}
}

const (
	slotGather = 5 * time.Millisecond  // from the first miss to the first attempt
	slotCool   = 60 * time.Millisecond // a turn's holder waits at least this before it tries again
)

// wakeLocked starts the loop, or wakes it; st.mu is held.
func (sp *slotPool) wakeLocked() {
	if sp.running {
		select {
		case sp.kick <- struct{}{}:
		default:
		}
		return
	}
	if sp.gs.stopping && len(sp.held) == 0 {
		return
	}
	sp.running = true
	sp.gs.loops.Add(1)
	go sp.loop()
}

// loop claims and gives up the pool's slots until it holds none and no
// demand is left.
func (sp *slotPool) loop() {
	defer sp.gs.loops.Done()
	st := sp.st
	var (
		demand   bool          // jobs wait for slots
		next     time.Time     // the next attempt
		delay    time.Duration // the backoff's
		boundary bool          // next is the attempt at a boundary
		lost     int           // boundary attempts lost in a row
		cool     time.Time     // no attempt before
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		st.mu.Lock()
		drop, wake := sp.sweepLocked(now)
		want := 0
		if !sp.gs.stopping {
			want = min(sp.waiting, len(sp.names)-len(sp.held))
		}
		// Takes missed a moment ago may be retrying after a broadcast.
		lastMiss := sp.lastMiss
		lingering := !sp.gs.stopping && now.Sub(lastMiss) < st.idle
		switch {
		case !demand && want > 0:
			demand, next, delay, boundary = true, now.Add(slotGather), st.pollMin, false
		case demand && (sp.waiting == 0 && !lingering || sp.gs.stopping):
			demand, lost = false, 0
		}
		if len(drop) == 0 && len(sp.held) == 0 && !demand && !lingering {
			sp.running = false
			st.mu.Unlock()
			return
		}
		st.mu.Unlock()

		if len(drop) > 0 {
			if late, turned := sp.giveUp(drop, now); turned {
				cool = later(cool, time.Now().Add(min(st.pollMax, slotCool+2*late)))
			}
			continue // the release took a while: look again
		}
		if demand && want > 0 && !now.Before(next) && !now.Before(cool) {
			got := sp.acquire(want)
			now = time.Now()
			switch {
			case got >= want:
				lost, delay, boundary, next = 0, st.pollMin, false, now.Add(slotGather)
				continue
			case boundary:
				lost++
				delay = st.pollMin // slots given up late come soon after
			default: // a worker that lost more boundaries polls more often
				delay = min(2*delay, st.pollMax>>min(lost, 3))
			}
			next, boundary = now.Add(delay/2+rand.N(delay/2+1)), false
			b := st.boundary(now).Add(40*time.Millisecond - 10*time.Millisecond*time.Duration(min(lost, 3)) + rand.N(3*time.Millisecond))
			if b.Before(next) {
				next, boundary = b, true
			}
		}
		if demand && want > 0 {
			wake = earliest(wake, later(next, cool))
		}
		if lingering {
			wake = earliest(wake, lastMiss.Add(st.idle))
		}
		if wake.IsZero() {
			wake = now.Add(time.Hour) // a kick comes first
		}
		timer.Reset(max(time.Until(wake), 0))
		select {
		case <-timer.C:
		case <-sp.kick:
		}
	}
}

// sweepLocked takes out of the pool the grants to give up (or lost) now,
// cancels the context of a job overrunning a slot being given up, and
// returns when to look again; st.mu is held.
func (sp *slotPool) sweepLocked(now time.Time) (drop []*slotGrant, wake time.Time) {
	st := sp.st
	for _, g := range sp.held {
		live := g.lease.Err() == nil
		switch {
		case g.ending || !live:
		case sp.gs.stopping || !now.Before(g.turn):
			g.ending, g.turned, g.endAt = true, !sp.gs.stopping, now
		case !g.busy && !now.Before(g.used.Add(st.idle)):
			g.ending, g.endAt = true, now
		}
		switch {
		case !live || g.ending && !g.busy:
			drop = append(drop, g)
		case g.ending: // its job runs: wait for it, bounded
			cut, end := g.endAt.Add(st.handoff-st.handoff/10), g.endAt.Add(st.handoff)
			if !now.Before(cut) && g.ctx.Err() == nil {
				g.cancel(fmt.Errorf("queue: slot %d of kind %q given up: its job ran into the handoff timeout (%v)", g.slot, sp.kind, st.handoff))
			}
			if !now.Before(end) {
				drop = append(drop, g)
			} else {
				wake = earliest(wake, cut, end)
			}
		case g.busy:
			wake = earliest(wake, g.turn)
		default:
			wake = earliest(wake, g.turn, g.used.Add(st.idle))
		}
	}
	for _, g := range drop {
		g.ending = true
		delete(sp.held, g.slot)
	}
	sp.free = slices.DeleteFunc(sp.free, func(g *slotGrant) bool { return g.ending })
	return drop, wake
}

// giveUp releases the leases of the grants dropped, in one statement (none
// when all were lost). It reports whether a turn ended among them, and by
// how much the latest was given up after its turn's end.
func (sp *slotPool) giveUp(drop []*slotGrant, now time.Time) (late time.Duration, turned bool) {
	var ls []*lease.Lease
	for _, g := range drop {
		if g.turned {
			turned, late = true, max(late, now.Sub(g.turn))
		}
		if g.lease.Err() == nil {
			ls = append(ls, g.lease)
		}
	}
	if len(ls) > 0 {
		if err := sp.gs.client.ReleaseMany(context.Background(), ls...); err != nil {
			sp.st.log("queue: releasing slots failed; they free themselves at expiry",
				"group", sp.group, "kind", sp.kind, "slots", len(ls), "err", err)
		}
	}
	for _, g := range drop {
		g.cancel(fmt.Errorf("queue: slot %d of kind %q given up: %w", g.slot, sp.kind, lease.ErrReleased))
	}
	return late, turned
}

// acquire makes one attempt to acquire want free slots, in one statement
// (and one more to release the extra ones it got), and returns how many it
// got; slotsChanged fires when it got any.
func (sp *slotPool) acquire(want int) int {
	st := sp.st
	st.mu.Lock()
	var names []string
	for i, name := range sp.names {
		if sp.held[i] == nil {
			names = append(names, name)
		}
	}
	st.mu.Unlock()
	if len(names) == 0 {
		return 0
	}
	ls, err := sp.gs.client.TryAcquireAny(context.Background(), names...)
	if err != nil {
		st.log("queue: acquiring slots failed; trying again", "group", sp.group, "kind", sp.kind, "err", err)
		return 0
	}
	if len(ls) > want {
		rand.Shuffle(len(ls), func(i, j int) { ls[i], ls[j] = ls[j], ls[i] })
		if err := sp.gs.client.ReleaseMany(context.Background(), ls[want:]...); err != nil {
			st.log("queue: releasing slots failed; they free themselves at expiry", "group", sp.group, "kind", sp.kind, "err", err)
		}
		ls = ls[:want]
	}
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, l := range ls {
		g := &slotGrant{pool: sp, slot: slices.Index(sp.names, l.Name()), lease: l, used: now, turn: st.turnEnd(now)}
		g.ctx, g.cancel = context.WithCancelCause(l.Context())
		sp.held[g.slot] = g
		sp.free = append(sp.free, g)
		context.AfterFunc(l.Context(), func() { // lost: drop it now
			st.mu.Lock()
			defer st.mu.Unlock()
			if sp.held[g.slot] == g {
				sp.wakeLocked()
			}
		})
	}
	if len(ls) > 0 {
		st.broadcastLocked()
	}
	return len(ls)
}

// boundary returns the first boundary of the turns after now.
func (st *slotState) boundary(now time.Time) time.Time {
	q := int64(st.turn)
	return time.Unix(0, (now.UnixNano()/q+1)*q)
}

// turnEnd returns when the turn of a grant at now ends: the first boundary
// at least turn/2 after it.
func (st *slotState) turnEnd(now time.Time) time.Time {
	return st.boundary(now.Add(st.turn/2 - 1))
}

// earliest returns the earliest of the non-zero times ts (zero: none).
func earliest(ts ...time.Time) (e time.Time) {
	for _, t := range ts {
		if !t.IsZero() && (e.IsZero() || t.Before(e)) {
			e = t
		}
	}
	return e
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
