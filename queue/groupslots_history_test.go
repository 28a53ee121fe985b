package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// slotRun is one run of the history: on node, on slot (-1: none), from
// start to end on the test's monotonic clock; cut when the slot's context
// ended it.
type slotRun struct {
	node       string
	slot       int
	start, end time.Duration
	cut        bool
	cause      error // why, if cut
}

// slotHistory records the runs of all nodes.
type slotHistory struct {
	base time.Time
	mu   sync.Mutex
	runs []slotRun
}

func (h *slotHistory) now() time.Duration { return time.Since(h.base) } // monotonic

func (h *slotHistory) add(r slotRun) {
	h.mu.Lock()
	h.runs = append(h.runs, r)
	h.mu.Unlock()
}

func (h *slotHistory) snapshot() []slotRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.runs)
}

// maxOverlap sweeps runs: the most that run at one instant, and when. A
// run's end comes before another's start at the same instant.
func maxOverlap(runs []slotRun) (most int, at time.Duration) {
	type event struct {
		t     time.Duration
		delta int
	}
	events := make([]event, 0, 2*len(runs))
	for _, r := range runs {
		events = append(events, event{r.start, +1}, event{r.end, -1})
	}
	slices.SortFunc(events, func(a, b event) int {
		if a.t != b.t {
			return int(a.t - b.t)
		}
		return a.delta - b.delta // ends first
	})
	n := 0
	for _, e := range events {
		if n += e.delta; n > most {
			most, at = n, e.t
		}
	}
	return most, at
}

// worker takes a slot of nd over and over until stop, runs 2 to 8 ms or
// (one run in thirty) 1 to 1.5 s, less if the slot's context ends, and
// releases it. With ignore, it runs
// whatever takeSlot answers (the negative control).
func (h *slotHistory) worker(t *testing.T, nd *slotNode, stop <-chan struct{}, ignore bool, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		changed := nd.p.slotsChanged()
		s, ok := nd.p.takeSlot("g", "fragile")
		if ok && s == nil {
			t.Error("takeSlot gave no slot for a limited kind")
			return
		}
		if !ok && !ignore {
			select {
			case <-changed:
			case <-time.After(50 * time.Millisecond):
			case <-stop:
				return
			}
			continue
		}
		r := slotRun{node: nd.id, slot: -1, start: h.now()}
		done := make(<-chan struct{})
		if s != nil {
			r.slot, done = s.g.slot, s.context().Done()
		}
		// Mostly short runs; one in thirty long, so that the member cut off
		// is likely running one when its lease is lost.
		d := time.Duration(2+rand.IntN(7)) * time.Millisecond
		if rand.IntN(30) == 0 {
			d = time.Second + rand.N(500*time.Millisecond)
		}
		select {
		case <-time.After(d):
		case <-done:
			r.cut, r.cause = true, context.Cause(s.context())
		}
		r.end = h.now()
		h.add(r)
		s.release()
	}
}

// The fleet-wide limit over a recorded history: 4 nodes share 3 slots,
// with 3 goroutines each taking slots (their misses are the demand),
// running and releasing them, so the slots go round by turns (of 1s here).
// One node holding slots is then cut off from the database (its renewals
// stop: a crash as the others see it). At no instant do more than 3 runs
// overlap, nor two on one slot; every node ran jobs (see
// TestGroupSlotsNoWorkerStarves for the bound on its waits); the
// cut-off node's runs end before its leases expire (and are the only ones
// cut short: the end of a turn waits for its job); and the survivors take
// its slots over. Then a fifth node joins, and runs jobs too. The negative
// control: the same checker on a history whose runs ignore takeSlot's
// answer finds more than 3 at once.
func TestGroupSlotsHistoryHoldsTheLimit(t *testing.T) {
	t.Parallel()
	const n = 3
	// Longer than any run: a handoff never cuts one.
	const handoff = 3 * time.Second
	url := pgtest.MigratedURL(t)
	var nodes []*slotNode
	tune := func(st *slotState) { st.turn = time.Second }
	for i := range 4 {
		nodes = append(nodes, startSlotNode(t, url, fmt.Sprintf("w%d", i), n, handoff, tune))
	}
	held := func(nds []*slotNode) int {
		total := 0
		for _, nd := range nds {
			total += len(nd.held())
		}
		return total
	}

	h := &slotHistory{base: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, nd := range nodes {
		for range 3 {
			wg.Add(1)
			go h.worker(t, nd, stop, false, &wg)
		}
	}
	time.Sleep(4 * time.Second) // a few turns

	// The victim: a node holding slots now.
	var victim *slotNode
	var survivors []*slotNode
	var victimSlots map[int]bool
	waitSlots(t, 5*time.Second, "a node holding slots", func() bool {
		for i, nd := range nodes {
			if hs := nd.held(); len(hs) > 0 {
				victim, victimSlots = nd, hs
				survivors = append(slices.Clone(nodes[:i]), nodes[i+1:]...)
				return true
			}
		}
		return false
	})
	killed := h.now()
	victim.proxy.Blackhole()
	t.Logf("cut %s off at %v, holding slots %v", victim.id, killed, victimSlots)
	waitSlots(t, 15*time.Second, "the survivors hold all slots", func() bool { return held(survivors) == n })
	time.Sleep(time.Second)
	// A node joins: it gets slots by turns.
	joined := startSlotNode(t, url, "w4", n, handoff, tune)
	survivors = append(survivors, joined)
	for range 3 {
		wg.Add(1)
		go h.worker(t, joined, stop, false, &wg)
	}
	waitSlots(t, 15*time.Second, "the joined node holds slots", func() bool { return len(joined.held()) > 0 })
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	runs := h.snapshot()
	if most, at := maxOverlap(runs); most > n {
		t.Errorf("%d runs at once at %v; the limit is %d", most, at, n)
	} else {
		t.Logf("%d runs, at most %d at once", len(runs), most)
	}
	// Each slot runs one job at a time, across its grants.
	bySlot := map[int][]slotRun{}
	for _, r := range runs {
		bySlot[r.slot] = append(bySlot[r.slot], r)
	}
	for slot, rs := range bySlot {
		if most, at := maxOverlap(rs); most > 1 {
			t.Errorf("slot %d ran %d jobs at once at %v", slot, most, at)
		}
	}
	ran, after := map[string]int{}, map[string]int{}
	for _, r := range runs {
		if r.start < killed {
			ran[r.node]++
		} else {
			after[r.node]++
		}
	}
	for _, nd := range append(slices.Clone(nodes), joined) {
		if ran[nd.id]+after[nd.id] == 0 {
			t.Errorf("%s ran no job: it starved", nd.id)
		}
	}
	t.Logf("runs by node before the cut %v, after it %v", ran, after)
	takenOver := map[int]bool{}
	for _, r := range runs {
		switch {
		case r.node == victim.id && r.end > killed+slotTTL:
			t.Errorf("the cut-off member's run on slot %d ended %v after the cut; its lease expired by %v",
				r.slot, r.end-killed, slotTTL)
		case r.node != victim.id && r.cut:
			t.Errorf("%s's run on slot %d was cut (%v): a graceful handoff must wait for it", r.node, r.slot, r.cause)
		case r.node != victim.id && r.start > killed && victimSlots[r.slot]:
			takenOver[r.slot] = true
		}
	}
	for s := range victimSlots {
		if !takenOver[s] {
			t.Errorf("slot %d of the cut-off member was not taken over", s)
		}
	}

	// The negative control: the survivors' runs ignoring takeSlot's answer.
	ch := &slotHistory{base: time.Now()}
	stop = make(chan struct{})
	for _, nd := range survivors {
		for range 3 {
			wg.Add(1)
			go ch.worker(t, nd, stop, true, &wg)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if most, _ := maxOverlap(ch.snapshot()); most <= n {
		t.Errorf("the control's runs ignoring the slots were at most %d at once: the check cannot fail", most)
	} else {
		t.Logf("control: %d runs at once without the slots", most)
	}
}
