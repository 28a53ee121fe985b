package queue

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// The fleet-wide limit of a kind (Policy.GroupConcurrency, N): the kind's N
// slots in a group are N named leases (slotNames), claimed on demand. A
// pipeline takes a free slot this Processor holds (takeSlot) before it
// starts a job of the kind, runs the handler under the slot's context too,
// and releases the slot when the job ends. When it finds none free, that
// is demand: the pool's loop (groupslots_pool.go) acquires free slot
// leases for it, and gives each up when it has been idle a moment, and at
// the end of its turn, so that the slots go round the workers that want
// them. A slot's context ends when its lease is lost; a slot given up
// while its job runs waits for the job first (bounded by the handoff
// timeout). See docs/control.md.

// slotState is a Processor's slots.
type slotState struct {
	// kinds are the limits of the limited kinds (none: no slot is ever
	// claimed); db and lease configure the slot leases' clients; handoff is
	// SlotHandoffTimeout with its default.
	kinds   map[string]int
	db      *leasehold.DB
	lease   lease.Config
	handoff time.Duration
	// The pools' timings (constants; tests shorten them): a free slot no
	// take used for idle is given up; a grant's turn ends at the first
	// multiple of turn (wall clock) at least turn/2 after it; acquire
	// attempts while demand lasts back off from pollMin to pollMax.
	idle, turn, pollMin, pollMax time.Duration
	log                          func(msg string, args ...any) // rate-limited warnings

	mu sync.Mutex
	// groups are the slots of the groups served now, by group.
	groups  map[string]*slotGroups
	changed chan struct{} // closed by broadcast
}

// slotGroups are the slot pools of one group's limited kinds and their
// lease client, from the group's first grant to this Processor to its last
// (serveSlotsAs, unserveSlots).
type slotGroups struct {
	grants   int // under st.mu
	client   *lease.Client
	pools    map[string]*slotPool
	stopping bool           // the group's last grant ended: give every slot up
	loops    sync.WaitGroup // the pools' loops
}

// init reads the limited kinds of cfg.
func (st *slotState) init(p *Processor, cfg ProcessorConfig) {
	for kind, h := range cfg.Workers.handlers {
		if n := h.opts.policy.GroupConcurrency; n > 0 {
			if st.kinds == nil {
				st.kinds = make(map[string]int)
			}
			st.kinds[kind] = n
		}
	}
	st.db, st.lease, st.handoff = cfg.SlotDB, cfg.SlotLease, cfg.SlotHandoffTimeout
	if st.handoff == 0 {
		st.handoff = cmp.Or(cfg.SlotLease.TTL, lease.DefaultTTL)
	}
	st.idle, st.turn, st.pollMin, st.pollMax = 100*time.Millisecond, 2*time.Second, 50*time.Millisecond, time.Second
	st.log = func(msg string, args ...any) { p.fails.Fail("slots", msg, args...) }
	st.groups = make(map[string]*slotGroups)
	st.changed = make(chan struct{})
}

// broadcastLocked wakes the waiters of slotsChanged, which take a slot
// again or count as demand again; st.mu is held.
func (st *slotState) broadcastLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
	for _, gs := range st.groups {
		for _, sp := range gs.pools {
			sp.waiting = 0
		}
	}
}

// slotGrant is one grant of a slot's lease to this Processor.
type slotGrant struct {
	pool   *slotPool
	slot   int
	lease  *lease.Lease
	ctx    context.Context // the lease's, also cancelled at the handoff timeout
	cancel context.CancelCauseFunc
	// Under st.mu: busy says a job runs on the slot; ending that it is
	// being given up (no take any more) since endAt; used is when its last
	// take was released (or it was granted); turn when its turn ends;
	// turned that it ends with its turn.
	busy, ending, turned bool
	used, turn           time.Time
	endAt                time.Time
}

// groupSlot is one of a kind's slots, taken by one run.
type groupSlot struct {
	g    *slotGrant
	ctx  context.Context
	once sync.Once
}

// takeSlot takes a free slot of kind in group that this Processor holds,
// if any; ok false when none is free (or the kind has no GroupConcurrency:
// then slot is nil and ok true). A miss is demand: the pool claims slots
// for it, and slotsChanged fires when one is granted.
func (p *Processor) takeSlot(group, kind string) (s *groupSlot, ok bool) {
	st := &p.groupSlots
	if st.kinds[kind] == 0 {
		return nil, true
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	gs := st.groups[group]
	if gs == nil || gs.stopping {
		return nil, false
	}
	sp := gs.pools[kind]
	for len(sp.free) > 0 {
		g := sp.free[len(sp.free)-1]
		sp.free = sp.free[:len(sp.free)-1]
		if g.ending || g.ctx.Err() != nil {
			continue // lost or being given up: the loop drops it
		}
		g.busy = true
		return &groupSlot{g: g, ctx: g.ctx}, true
	}
	sp.waiting++
	sp.lastMiss = time.Now()
	sp.wakeLocked()
	return nil, false
}

// release gives the slot back (nil: nothing). A second release of one
// take does nothing.
func (s *groupSlot) release() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		g := s.g
		st := g.pool.st
		st.mu.Lock()
		defer st.mu.Unlock()
		g.busy, g.used = false, time.Now()
		if !g.ending && g.ctx.Err() == nil {
			g.pool.free = append(g.pool.free, g)
		}
		g.pool.wakeLocked() // its idle time starts, or it is given up now
		st.broadcastLocked()
	})
}

// context returns the context that ends when the slot's lease is lost,
// or its job overran the handoff timeout of a slot being given up (nil
// slot: nil).
func (s *groupSlot) context() context.Context {
	if s == nil {
		return nil
	}
	return s.ctx
}

// slotsChanged returns a channel closed the next time a slot of any kind is
// released or granted (a pipeline waiting for one takes it then).
func (p *Processor) slotsChanged() <-chan struct{} {
	st := &p.groupSlots
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.changed
}

// slotNames are the lease names of the n slots of kind in group:
// "slots/<n>/<len(group)>/<group>/<kind>/<i>" (the length keeps them
// unique), or "slots/<n>/#<16 hex digits of its XXH64>/<i>" when the
// prefix would be longer than 100 bytes. The count is in the name: a
// deploy that changes it claims other leases (see docs/control.md).
func slotNames(group, kind string, n int) []string {
	prefix := fmt.Sprintf("slots/%d/%d/%s/%s", n, len(group), group, kind)
	if len(prefix) > 100 {
		prefix = fmt.Sprintf("slots/%d/#%016x", n, xxhash.Sum64String(prefix))
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s/%d", prefix, i)
	}
	return names
}

// slotOwner is the owner id of the slot leases of a group served by
// member id: "<id>~slots#<8 random hex digits>", id's end replaced by a
// hash of it when that is longer than an owner id may be.
func slotOwner(id string) string {
	const suffix = "~slots"
	if len(id)+len(suffix) > 200 {
		id = fmt.Sprintf("%s#%016x", id[:200-len(suffix)-17], xxhash.Sum64String(id))
	}
	return fmt.Sprintf("%s%s#%08x", id, suffix, rand.Uint32())
}

// serveSlots counts grant o of its group (see serveSlotsAs).
func (p *Processor) serveSlots(o partition.Ownership) {
	if len(p.groupSlots.kinds) == 0 {
		return
	}
	id := lease.DefaultOwner()
	if o.Lease != nil {
		id = partition.MemberOf(o.Lease.Owner())
	}
	p.serveSlotsAs(o.Group, id)
}

// serveSlotsAs counts a grant of group; at the group's first, it sets up
// the slot pools of its limited kinds, their leases owned as member id
// (slotOwner). It does no I/O.
func (p *Processor) serveSlotsAs(group, id string) {
	st := &p.groupSlots
	st.mu.Lock()
	defer st.mu.Unlock()
	if gs := st.groups[group]; gs != nil {
		gs.grants++
		return
	}
	cfg := st.lease
	cfg.Owner = slotOwner(id)
	c, err := lease.New(st.db, cfg)
	if err != nil { // validated by NewProcessor
		p.log.Error("queue: the slot leases' client cannot be made: the limited kinds' jobs will not run", "group", group, "err", err)
		return
	}
	gs := &slotGroups{grants: 1, client: c, pools: make(map[string]*slotPool)}
	for kind, n := range st.kinds {
		gs.pools[kind] = &slotPool{st: st, gs: gs, group: group, kind: kind, names: slotNames(group, kind, n),
			held: make(map[int]*slotGrant), kick: make(chan struct{}, 1)}
	}
	st.groups[group] = gs
}

// unserveSlots counts the end of a grant of group; at the group's last, it
// gives the group's slots up gracefully (their jobs' ends awaited, at most
// the handoff timeout) and returns once they are.
func (p *Processor) unserveSlots(group string) {
	st := &p.groupSlots
	if len(st.kinds) == 0 {
		return
	}
	st.mu.Lock()
	gs := st.groups[group]
	if gs == nil {
		st.mu.Unlock()
		return
	}
	if gs.grants--; gs.grants > 0 {
		st.mu.Unlock()
		return
	}
	delete(st.groups, group)
	gs.stopping = true
	for _, sp := range gs.pools {
		if sp.running {
			sp.wakeLocked()
		}
	}
	st.mu.Unlock()
	gs.loops.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gs.client.Close(ctx); err != nil {
		p.log.Warn("queue: closing the slot leases' client failed", "group", group, "err", err)
	}
}

// heldSlots returns the slots of kind in group this Processor holds now
// (for tests).
func (p *Processor) heldSlots(group, kind string) []int {
	st := &p.groupSlots
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []int
	if gs := st.groups[group]; gs != nil {
		for i, g := range gs.pools[kind].held {
			if g.ctx.Err() == nil {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkSlotLease validates cfg.SlotLease when a kind has a
// GroupConcurrency (a client made and closed: no I/O).
func checkSlotLease(cfg ProcessorConfig) error {
	for _, h := range cfg.Workers.handlers {
		if h.opts.policy.GroupConcurrency > 0 {
			c, err := lease.New(cfg.SlotDB, cfg.SlotLease)
			if err != nil {
				return fmt.Errorf("%w: SlotLease: %w", ErrInvalidConfig, err)
			}
			return c.Close(context.Background())
		}
	}
	return nil
}
