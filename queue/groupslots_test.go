package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/netproxy"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// slotJob is the kind the slot tests limit.
type slotJob struct{}

func (slotJob) Kind() string { return "fragile" }

// plainJob is a kind without a limit.
type plainJob struct{}

func (plainJob) Kind() string { return "plain" }

const slotTTL = time.Second

// slotNode is a Processor serving group "g" with the kind "fragile"
// limited to n, on a pool of its own through a fault proxy, from start
// (serveSlotsAs) to the test's end.
type slotNode struct {
	id    string
	p     *Processor
	proxy *netproxy.Proxy
}

// startSlotNode starts a slotNode as member id; tune (if any) sets the
// pools' timings before they start.
func startSlotNode(t *testing.T, url, id string, n int, handoff time.Duration, tune ...func(*slotState)) *slotNode {
	t.Helper()
	pool, proxy := pgtest.ProxiedPool(t, url, func(pc *pgxpool.Config) {
		pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	ws := NewWorkers()
	Handle(ws, func(context.Context, *Work[slotJob]) error { return nil }, WithPolicy(Policy{GroupConcurrency: n}))
	Handle(ws, func(context.Context, *Work[plainJob]) error { return nil })
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: ws,
		SlotLease: lease.Config{TTL: slotTTL}, SlotHandoffTimeout: handoff})
	pgtest.Must(t, err)
	for _, f := range tune {
		f(&p.groupSlots)
	}
	nd := &slotNode{id: id, p: p, proxy: proxy}
	p.serveSlotsAs("g", id)
	t.Cleanup(func() {
		proxy.Heal()
		p.unserveSlots("g")
	})
	return nd
}

// held returns the slots the node holds now.
func (nd *slotNode) held() map[int]bool {
	out := map[int]bool{}
	for _, i := range nd.p.heldSlots("g", "fragile") {
		out[i] = true
	}
	return out
}

// take waits until the node takes a slot, its takes' misses being the
// demand, failing the test after within.
func (nd *slotNode) take(t *testing.T, within time.Duration) *groupSlot {
	t.Helper()
	s := nd.tryTake(within)
	if s == nil {
		t.Fatalf("%s took no slot within %v", nd.id, within)
	}
	return s
}

// tryTake is take, returning nil after within.
func (nd *slotNode) tryTake(within time.Duration) *groupSlot {
	for start := time.Now(); ; {
		changed := nd.p.slotsChanged()
		if s, ok := nd.p.takeSlot("g", "fragile"); ok {
			return s
		}
		select {
		case <-changed:
		case <-time.After(time.Until(start.Add(within))):
			return nil
		}
	}
}

// waitSlots waits until cond holds, failing the test after within.
func waitSlots(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > within {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}

// slotRows returns the slot leases held in the database, by owner.
func slotRows(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(pgtest.Context(t), `SELECT owner FROM leasehold.leases
		WHERE name LIKE 'slots/%' AND expires_at > clock_timestamp()`)
	pgtest.Must(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var o string
		pgtest.Must(t, rows.Scan(&o))
		out[o]++
	}
	pgtest.Must(t, rows.Err())
	return out
}

// A kind without a limit needs no slot; a limited kind of a group not
// served has none; a nil slot is a no-op; SlotLease is validated.
func TestGroupSlotUnlimitedKind(t *testing.T) {
	t.Parallel()
	ws := NewWorkers()
	Handle(ws, func(context.Context, *Work[slotJob]) error { return nil }, WithPolicy(Policy{GroupConcurrency: 2}))
	Handle(ws, func(context.Context, *Work[plainJob]) error { return nil })
	p, err := NewProcessor(pgtest.DBOn(t, pgtest.Pool(t)), ProcessorConfig{Workers: ws})
	pgtest.Must(t, err)
	if s, ok := p.takeSlot("g", "plain"); s != nil || !ok {
		t.Fatalf("takeSlot(plain) = %v, %v; want nil, true", s, ok)
	}
	if s, ok := p.takeSlot("g", "unknown"); s != nil || !ok {
		t.Fatalf("takeSlot(unknown kind) = %v, %v; want nil, true", s, ok)
	}
	if s, ok := p.takeSlot("g", "fragile"); s != nil || ok {
		t.Fatalf("takeSlot(fragile) of a group not served = %v, %v; want nil, false", s, ok)
	}
	var s *groupSlot
	s.release()
	if s.context() != nil {
		t.Fatal("a nil slot's context is not nil")
	}
	for _, c := range []lease.Config{{Owner: "x"}, {TTL: time.Millisecond}} {
		if _, err := NewProcessor(pgtest.DBOn(t, pgtest.Pool(t)), ProcessorConfig{Workers: ws,
			SlotLease: c}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("SlotLease %+v: %v; want ErrInvalidConfig", c, err)
		}
	}
}

// The slots' lease names are unique per (group, kind, count), and fit;
// so do the owners.
func TestGroupSlotNames(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	long := strings.Repeat("x", 300)
	for _, c := range [][2]string{{"a/b", "c"}, {"a", "b/c"}, {"a", "b"}, {long, "k"}, {long, "k2"}} {
		for _, n := range []int{1, 3} {
			for _, name := range slotNames(c[0], c[1], n) {
				if len(name) == 0 || len(name) > lease.MaxNameLen || names[name] {
					t.Fatalf("slotNames(%q, %q, %d): %q empty, too long or taken", c[0], c[1], n, name)
				}
				names[name] = true
			}
		}
	}
	if got := slotNames("g", "fragile", 2); got[0] != "slots/2/1/g/fragile/0" || got[1] != "slots/2/1/g/fragile/1" {
		t.Fatalf("slotNames(g, fragile, 2) = %q", got)
	}
	a, b := slotOwner(long+"a"), slotOwner(long+"b")
	if len(a) > lease.MaxNameLen || len(b) > lease.MaxNameLen || a[:200] == b[:200] {
		t.Fatalf("owners of two long member ids: %q and %q: too long, or alike", a, b)
	}
	if o := slotOwner("w1"); !strings.HasPrefix(o, "w1~slots#") || slotOwner("w1") == o {
		t.Fatalf("slotOwner(w1) = %q; want w1~slots#<random>", o)
	}
}

// A slot is claimed on demand: none is held (and no statement runs) before
// a take misses; then it is granted within 50ms, slotsChanged fires, and
// the take after it gets it. It is taken again once released, given up
// when idle, and the loop ends then.
func TestGroupSlotsClaimedOnDemand(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	nd := startSlotNode(t, url, "w1", 1, 0)
	time.Sleep(200 * time.Millisecond)
	if rows := slotRows(t, pool); len(rows) != 0 || len(nd.held()) != 0 {
		t.Fatalf("slots held before any demand: %v", rows)
	}
	granted := nd.p.slotsChanged()
	demand := time.Now()
	if s, ok := nd.p.takeSlot("g", "fragile"); s != nil || ok {
		t.Fatal("a slot taken before its grant")
	}
	select {
	case <-granted:
	case <-time.After(5 * time.Second):
		t.Fatal("slotsChanged did not fire at the grant")
	}
	if took := time.Since(demand); took > 100*time.Millisecond {
		t.Errorf("the slot was granted %v after the demand; want within about 50ms", took)
	}
	s, ok := nd.p.takeSlot("g", "fragile")
	if s == nil || !ok {
		t.Fatalf("takeSlot after the grant = %v, %v; want a slot", s, ok)
	}
	if s2, ok := nd.p.takeSlot("g", "fragile"); s2 != nil || ok {
		t.Fatal("a second slot taken of a limit of 1")
	}
	released := nd.p.slotsChanged()
	s.release()
	select {
	case <-released:
	case <-time.After(time.Second):
		t.Fatal("slotsChanged did not fire at the release")
	}
	s.release() // a second release of the take does nothing
	s, ok = nd.p.takeSlot("g", "fragile")
	if s == nil || !ok {
		t.Fatal("the released slot was not taken again")
	}
	if s2, ok := nd.p.takeSlot("g", "fragile"); s2 != nil || ok {
		t.Fatal("a double release freed the slot twice")
	}
	s.release()
	waitSlots(t, 2*time.Second, "the idle slot given up", func() bool {
		st := &nd.p.groupSlots
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(slotRows(t, pool)) == 0 && !st.groups["g"].pools["fragile"].running
	})
}

// A slot's context ends, with the lease's loss as its cause, when its
// node's connections are blackholed (its renewals stop: a crash as the
// others see it) before the database expires it.
func TestGroupSlotContextEndsOnLeaseLoss(t *testing.T) {
	t.Parallel()
	nd := startSlotNode(t, pgtest.MigratedURL(t), "w1", 1, 0)
	s := nd.take(t, 5*time.Second)
	defer s.release()
	cut := time.Now()
	nd.proxy.Blackhole()
	select {
	case <-s.context().Done():
	case <-time.After(slotTTL + time.Second):
		t.Fatal("the slot's context did not end after its lease's renewals stopped")
	}
	if took := time.Since(cut); took > slotTTL {
		t.Errorf("the context ended %v after the cut; want within the TTL %v", took, slotTTL)
	}
	if err := context.Cause(s.context()); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("cause %v; want lease.ErrLost", err)
	}
}

// The end of a turn waits for the slot's job: while it runs, the job's
// context stays live, the slot is taken no more, and another node wanting
// it does not get it; once the job releases it, that node gets it within
// the poll delay (the holder's cooldown lets it in first). A job that does
// not end when its node stops serving the group has its context cancelled
// near the handoff timeout, and the slot is released at it.
func TestGroupSlotTurnWaitsForItsJob(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	const handoff = 3 * time.Second
	const turn = time.Second
	tune := func(st *slotState) { st.turn = turn }
	a := startSlotNode(t, url, "a", 1, handoff, tune)
	b := startSlotNode(t, url, "b", 1, handoff, tune)
	s := a.take(t, 5*time.Second)
	granted := time.Now()
	got := make(chan *groupSlot, 1)
	go func() { got <- b.tryTake(20 * time.Second) }()
	// Past the turn's end (at most 1.5 turns after the grant) and more.
	time.Sleep(turn*3/2 + 500*time.Millisecond)
	if s.context().Err() != nil {
		t.Fatalf("the job's context ended at its turn's end: %v", context.Cause(s.context()))
	}
	select {
	case <-got:
		t.Fatal("b got the slot while a's job ran on it")
	default:
	}
	if s2, ok := a.p.takeSlot("g", "fragile"); s2 != nil || ok {
		t.Fatal("a slot being given up was taken again")
	}
	released := time.Now()
	s.release()
	var sb *groupSlot
	select {
	case sb = <-got:
	case <-time.After(5 * time.Second):
	}
	if sb == nil {
		t.Fatal("b did not get the slot after a's job ended")
	}
	if took := time.Since(released); took > 1200*time.Millisecond {
		t.Errorf("b got the slot %v after a's job ended; want within the poll delay (1s)", took)
	}
	t.Logf("a held the slot for %v; b got it %v after its job ended", released.Sub(granted), time.Since(released))
	// A job that ignores its context while b stops serving the group:
	// cancelled near the timeout, released at it, and a gets the slot.
	defer sb.release()
	start := time.Now()
	stopped := make(chan struct{})
	go func() {
		b.p.unserveSlots("g")
		close(stopped)
	}()
	<-sb.context().Done()
	if took := time.Since(start); took < handoff*8/10 || took > handoff {
		t.Errorf("the job's context ended %v into the stop; want at nine tenths of %v", took, handoff)
	}
	select {
	case <-stopped:
	case <-time.After(2 * handoff):
		t.Fatal("the stop did not end")
	}
	if took := time.Since(start); took < handoff*8/10 || took > handoff+time.Second {
		t.Errorf("the stop took %v; want about the handoff timeout %v", took, handoff)
	}
	a.take(t, 5*time.Second).release()
}
