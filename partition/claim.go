package partition

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/lease"
)

// reconcile reads the live view, hands off partitions no longer assigned to
// this member and claims free ones that are. It returns when to look again:
// readInterval, or sooner when another member's membership or a wanted
// partition's lease expires sooner, or a cooldown ends, or after a short
// backoff when the round failed (retryAfter).
func (m *Member) reconcile() time.Duration {
	next := m.readInterval()
	soon := func(d time.Duration) {
		if d > 0 && d+10*time.Millisecond < next {
			next = d + 10*time.Millisecond
		}
	}
	if m.Err() != nil {
		return next
	}
	var n int
	var live []string
	var othersExpire *float64
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease.StatementTimeout)
	err := m.pool.QueryRow(ctx, m.q.View, m.cfg.Group, m.cfg.ID).Scan(&n, &live, &othersExpire)
	cancel()
	m.reads.Add(1)
	if err != nil {
		if m.ctx.Err() == nil {
			m.fails.Fail("view", "partition: reading the membership failed", "err", m.dbErr("view", err))
		}
		return m.retryAfter(next)
	}
	m.fails.Recovered("view", "partition: reading the membership recovered")
	if othersExpire != nil {
		soon(time.Duration(*othersExpire * float64(time.Second)))
	}
	if n != m.cfg.Partitions { // the group was recreated under us
		m.fail(&CountError{Group: m.cfg.Group, Configured: m.cfg.Partitions, Stored: n})
		return next
	}
	owners, err := m.assign(live, n)
	if err != nil {
		m.log.Error("partition: assignment failed", "err", err)
		return next
	}
	m.wanted.Store(&owners)

	now := m.clock.Now()
	var want []string
	parts := make(map[string]int)
	m.mu.Lock()
	if m.failure != nil || m.ctx.Err() != nil {
		m.mu.Unlock()
		return next
	}
	var moved []*claim
	for p, c := range m.claims {
		if owners[p] != m.cfg.ID && !c.ending {
			moved = append(moved, c)
		}
	}
	for p, owner := range owners {
		if _, claimed := m.claims[p]; owner != m.cfg.ID || claimed {
			continue
		}
		if until, ok := m.cooldown[p]; ok && now.Before(until) {
			soon(until.Sub(now))
			continue
		}
		delete(m.cooldown, p)
		name := LeaseName(m.cfg.Group, p)
		want, parts[name] = append(want, name), p
	}
	m.mu.Unlock()
	for _, c := range moved {
		// A lease past its deadline (the member was paused, say) is lost,
		// not handed off: Err says so, and may run loss hooks, so it is
		// called outside m.mu.
		cause := c.l.Err()
		if cause == nil {
			cause = ErrHandoff
		}
		m.mu.Lock()
		if !c.ending {
			m.endLocked(c, cause)
		}
		m.mu.Unlock()
	}
	if len(want) == 0 {
		m.failedRounds = 0
		m.handoffPolls.Store(0)
		return next
	}

	claimed := m.clock.Now()
	ctx, cancel = context.WithTimeout(m.ctx, m.cfg.Lease.StatementTimeout)
	ls, err := m.leases.TryAcquireAny(ctx, want...)
	cancel()
	if err != nil {
		m.fails.Fail("claim", "partition: claiming failed", "partitions", len(want), "err", err)
		return m.retryAfter(next)
	}
	m.fails.Recovered("claim", "partition: claiming recovered")
	got := make(map[string]bool, len(ls))
	for _, l := range ls {
		got[l.Name()] = true
		m.own(parts[l.Name()], l)
	}
	var busy []string
	for _, name := range want {
		if !got[name] {
			busy = append(busy, name)
		}
	}
	if len(busy) == 0 {
		m.failedRounds = 0
		m.handoffPolls.Store(0)
		return next
	}
	// Held by a member handing off (or about to), or one that crashed.
	ctx, cancel = context.WithTimeout(m.ctx, m.cfg.Lease.StatementTimeout)
	infos, err := m.leases.InspectMany(ctx, busy...)
	cancel()
	if err != nil {
		return m.retryAfter(next) // when the busy leases expire is unknown
	}
	held, handing := 0, false
	for _, i := range infos {
		if i.Held() {
			held++
			soon(i.ExpiresAt.Sub(i.Now))
			// A live member other than this one (a former incarnation of
			// it, one that crashed, frees its leases only at expiry).
			owner := MemberOf(i.Owner)
			handing = handing || owner != m.cfg.ID && slices.Contains(live, owner)
		}
	}
	if handing {
		soon(m.handoffPoll(m.clock.Now().Sub(claimed)))
	} else {
		m.handoffPolls.Store(0) // the next handoff's polls start afresh
	}
	if held < len(busy) {
		// Free, yet not granted: the lease client keeps a name whose
		// acquire had an unknown outcome to itself until it has freed
		// any grant that acquire may have made (a background
		// statement), or another member took and gave it back
		// meanwhile. Nothing will say when: look again soon.
		return m.retryAfter(next)
	}
	m.failedRounds = 0
	return next
}

// handoffPoll returns how long to wait before trying again to claim a
// wanted partition that a live member holds: one handing it off, or about
// to once it reads the membership. A prompt release does not notify (see
// release.go): the member tries again every handoffPollEvery for
// handoffFastPolls tries, which covers lateRelease with room for the two
// members reading the membership at different moments, then backs off,
// doubling up to PollInterval; a later release notifies. took is how long
// this round's claim took: the wait is at least that, so that members
// polling a loaded server (a fleet started all at once, each member
// waiting for partitions) slow down as it does rather than add to its
// load. (Four times that left partitions unowned for up to 0.9 s in a
// rolling deploy of 64 members, where a claim now and then takes 150 ms.)
func (m *Member) handoffPoll(took time.Duration) time.Duration {
	d := handoffPollEvery
	if n := int(m.handoffPolls.Add(1)) - 1 - handoffFastPolls; n >= 0 {
		d = handoffPollEvery << min(n+1, 16)
	}
	return min(max(d, took), m.cfg.PollInterval)
}

// handoffPollEvery and handoffFastPolls shape handoffPoll: 16
// tries 25 ms apart (400 ms: a holder may read the membership a few
// hundred milliseconds after this member on a busy server, and its
// release's lateness counts from then), then 50 ms doubling.
const (
	handoffPollEvery = 25 * time.Millisecond
	handoffFastPolls = 16
)

// retryFirst is the first wait after a reconcile round that failed (a
// read or a claim the server timed out or refused); each failure in a row
// doubles it, up to PollInterval.
const retryFirst = 50 * time.Millisecond

// retryAfter returns the wait after a failed round: the next attempt comes
// after a short backoff, not at the next scheduled read (while listening,
// a TTL away: a member whose claims timed out on a loaded server, 64
// workers starting together, sat out a TTL of 15 s unless a notification
// woke it), and at most one statement per PollInterval reaches a database
// that is down.
func (m *Member) retryAfter(next time.Duration) time.Duration {
	d := min(m.cfg.PollInterval, retryFirst<<min(m.failedRounds, 16))
	m.failedRounds++
	return min(next, d)
}

// assign is Assign, remembered for the last member set: the set rarely
// changes, and computing it costs about a millisecond at 64 members.
// Only the reconcile goroutine calls it.
func (m *Member) assign(live []string, n int) ([]string, error) {
	if m.lastOwners != nil && slices.Equal(live, m.lastLive) {
		return m.lastOwners, nil
	}
	owners, err := Assign(live, n)
	if err == nil {
		m.lastLive, m.lastOwners = slices.Clone(live), owners
	}
	return owners, err
}

// own starts serving a freshly granted partition.
func (m *Member) own(p int, l *lease.Lease) {
	ctx, cancel := context.WithCancelCause(l.Context())
	c := &claim{p: p, l: l, cancel: cancel}
	m.mu.Lock()
	if m.failure != nil || m.ctx.Err() != nil { // stopping: give it straight back
		m.mu.Unlock()
		cancel(ErrStopped)
		ctx, cancelRelease := context.WithTimeout(context.Background(), m.cfg.Lease.StatementTimeout)
		defer cancelRelease()
		if l.Release(ctx) == nil {
			m.notifyReleased(ctx, []int{p})
		}
		return
	}
	m.claims[p] = c
	m.wg.Add(1)
	m.mu.Unlock()
	go m.serve(ctx, c)
}

// serve runs Run for one grant on the claim's goroutine (its only one: a
// member owning many partitions keeps one goroutine per grant, not two),
// then hands the partition off (handoff). A Run that has not returned
// HandoffTimeout after its context ended is left running: a timer hands
// the partition off without it.
func (m *Member) serve(ctx context.Context, c *claim) {
	log := m.log.With("partition", c.p, "token", int64(c.l.Token()))
	log.Debug("partition: owned")
	var (
		once sync.Once
		mu   sync.Mutex
		// ended is when ctx ended (zero: not yet), timer the handoff
		// timeout, returned whether Run returned: all under mu.
		ended    time.Time
		timer    lease.Timer
		returned bool
	)
	handoff := func(early bool) {
		once.Do(func() {
			mu.Lock()
			start := ended
			mu.Unlock()
			m.handoff(ctx, c, log, early, start)
		})
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return
		}
		ended = m.clock.Now()
		timer = m.clock.AfterFunc(m.cfg.HandoffTimeout, func() {
			log.Error("partition: Run did not return within HandoffTimeout; releasing anyway "+
				"(its writes carry a superseded token and are refused by fenced resources)",
				"timeout", m.cfg.HandoffTimeout)
			handoff(false)
		})
	})
	func() {
		defer func() {
			if r := recover(); r != nil {
				log.Error("partition: Run panicked", "panic", r, "stack", string(debug.Stack()))
			}
		}()
		m.cfg.Run(ctx, Ownership{Group: m.cfg.Group, Partition: c.p, Token: c.l.Token(), Lease: c.l})
	}()
	early := returnedEarly(ctx, stop)
	mu.Lock()
	returned = true
	if timer != nil {
		timer.Stop()
	}
	if ended.IsZero() {
		ended = m.clock.Now()
	}
	mu.Unlock()
	if early {
		c.cancel(errRunReturned)
		m.mu.Lock()
		c.ending = true
		m.mu.Unlock()
	}
	handoff(early)
}

// handoff ends claim c once its Run returned (or HandoffTimeout passed
// since ctx ended at start): it releases the partition unless the lease
// was lost (with the other partitions the member hands off meanwhile: see
// release.go), then forgets the claim.
func (m *Member) handoff(ctx context.Context, c *claim, log *slog.Logger, early bool, start time.Time) {
	cause := context.Cause(ctx)
	if errors.Is(cause, lease.ErrLost) {
		// The lease client logs the loss (rate-limited); the next
		// "assignment changed" line counts it.
		log.Debug("partition: lost", "err", cause)
		m.mu.Lock()
		m.lost++
		m.mu.Unlock()
		m.forget(c, early)
		return
	}
	late := m.clock.Now().Sub(start) >= m.lateRelease
	m.releases.Add(&pendingRelease{p: c.p, l: c.l, late: late, then: func(err error) {
		log.Debug("partition: handed off", "reason", cause, "wait", m.clock.Now().Sub(start), "err", err)
		m.forget(c, early)
	}})
}

// forget ends claim c's bookkeeping once its partition is released (or
// its lease lost): the claim is removed, and a partition whose Run returned
// early is held back for a cooldown. Then the reconcile loop looks again.
func (m *Member) forget(c *claim, early bool) {
	defer m.wg.Done()
	m.mu.Lock()
	if m.claims[c.p] == c {
		delete(m.claims, c.p)
	}
	if early {
		m.failures[c.p]++
		wait := min(time.Minute, m.cfg.PollInterval<<min(m.failures[c.p]-1, 16))
		m.cooldown[c.p] = m.clock.Now().Add(wait)
		m.fails.Fail("early", "partition: Run returned before its context was cancelled; claiming again later",
			"partition", c.p, "token", int64(c.l.Token()), "after", wait)
	} else {
		delete(m.failures, c.p)
	}
	m.mu.Unlock()
	m.poke()
}

// returnedEarly reports whether Run gave up by itself, before ctx ended,
// once Run returned; stop is ctx's AfterFunc's. stop alone cannot tell: a
// Run that returned as ctx ended may call it before the context package
// has started the AfterFunc, and stop then reports true for a Run that did
// return on its context (seen once in 2,430 handoffs of 64 members
// starting together: a partition held back for a cooldown it had not
// earned, with a warning that Run returned early).
func returnedEarly(ctx context.Context, stop func() bool) bool {
	return stop() && ctx.Err() == nil
}

// errRunReturned is the cause of a claim whose Run returned by itself.
var errRunReturned = errors.New("partition: Run returned")

// endAll ends every claim with cause and returns how many it ended.
func (m *Member) endAll(cause error) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.claims {
		if !c.ending {
			m.endLocked(c, cause)
			n++
		}
	}
	return n
}

// reportAssignment logs one INFO line when the partitions this member
// holds changed since the previous line: how many it holds, how many it
// gained and gave up (lost ones included, and counted apart), and the
// number of live members. Per-partition grants and handoffs are DEBUG.
func (m *Member) reportAssignment() {
	m.mu.Lock()
	held := make(map[int]bool, len(m.claims))
	for p, c := range m.claims {
		if !c.ending {
			held[p] = true
		}
	}
	lost := m.lost
	m.mu.Unlock()
	added, removed := 0, 0
	for p := range held {
		if !m.reported[p] {
			added++
		}
	}
	for p := range m.reported {
		if !held[p] {
			removed++
		}
	}
	if added == 0 && removed == 0 {
		return
	}
	m.mu.Lock()
	m.lost -= lost
	m.mu.Unlock()
	m.reported = held
	m.log.Info("partition: assignment changed", "owned", len(held), "added", added, "removed", removed,
		"lost", lost, "members", len(m.lastLive))
}

func (m *Member) endLocked(c *claim, cause error) {
	c.ending = true
	c.cancel(cause)
}
