package partition

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/store"
)

// heartbeat joins or extends this member's membership, on the database
// clock; a (re)join wakes the others (in the same statement) and this
// member's reconcile loop.
func (m *Member) heartbeat(ctx context.Context) error {
	return m.heartbeatRow(m.pool.QueryRow(ctx, m.q.Heartbeat, m.heartbeatArgs()...))
}

// heartbeatArgs are the arguments of the heartbeat statement.
func (m *Member) heartbeatArgs() []any {
	return []any{m.cfg.Group, m.cfg.ID, m.incarnation, m.cfg.Lease.TTL.Microseconds(), m.q.Channel}
}

// heartbeatRow reads the heartbeat statement's result.
func (m *Member) heartbeatRow(r pgx.Row) error {
	var joined bool
	var woke *int
	err := r.Scan(&joined, &woke)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrDuplicateMember
	}
	if err != nil {
		return m.dbErr("heartbeat", err)
	}
	if joined { // the statement woke the others
		m.poke()
	}
	return nil
}

// heartbeatLoop extends the membership every RenewInterval. A heartbeat
// that fails (a statement the loaded server timed out) is tried again
// after a short backoff, and given until the membership would expire
// rather than one StatementTimeout (heartbeatWithin): a live member whose
// heartbeats timed out on a server busy with a fleet's start lost its
// membership, and the group rebalanced around it, adding to the load that
// timed the others' out (64 members at TTL 5 s never converged).
func (m *Member) heartbeatLoop() {
	last := m.clock.Now() // Start's join, about
	wait, failures := m.cfg.Lease.RenewInterval, 0
	for m.wait(wait, nil) && m.Err() == nil {
		start := m.clock.Now()
		timeout := m.cfg.Lease.StatementTimeout
		if left := last.Add(m.cfg.Lease.TTL).Sub(start); failures > 0 && left > timeout {
			timeout = left
		}
		err := m.heartbeatWithin(timeout)
		switch {
		case errors.Is(err, ErrDuplicateMember):
			m.fail(err)
			return
		case err != nil && m.ctx.Err() == nil:
			m.fails.Fail("heartbeat", "partition: heartbeat failed", "err", err, "timeout", timeout)
		case err == nil:
			m.fails.Recovered("heartbeat", "partition: heartbeat recovered")
		}
		if err != nil {
			wait = min(m.cfg.Lease.RenewInterval, retryFirst<<min(failures, 16))
			failures++
			continue
		}
		last, wait, failures = start, m.cfg.Lease.RenewInterval, 0
	}
}

// heartbeatWithin runs heartbeat bounded by timeout. Beyond the member
// pool's StatementTimeout, which its connections' statement_timeout and
// lock_timeout enforce, it raises both for one transaction (withTimeouts),
// sent with the heartbeat in one round trip.
func (m *Member) heartbeatWithin(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(m.ctx, timeout)
	defer cancel()
	if timeout <= m.cfg.Lease.StatementTimeout {
		return m.heartbeat(ctx)
	}
	var err error
	b := withTimeouts(timeout)
	b.Queue(m.q.Heartbeat, m.heartbeatArgs()...).QueryRow(func(r pgx.Row) error {
		err = m.heartbeatRow(r)
		return nil // ErrDuplicateMember commits nothing to undo: the statement changed no row
	})
	b.Queue("COMMIT")
	if serr := m.pool.SendBatch(ctx, b).Close(); serr != nil && err == nil {
		err = m.dbErr("heartbeat", serr)
	}
	return err
}

// withTimeouts returns a batch that opens a transaction whose
// statement_timeout, lock_timeout and idle_in_transaction_session_timeout
// are timeout (store.JoinSettings), for a step that may take longer than
// the member pool's StatementTimeout: Start's, and a heartbeat given until
// the membership would expire. The caller queues its statements and
// COMMIT, and sends it.
func withTimeouts(timeout time.Duration) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(store.JoinSettings, strconv.FormatInt(max(timeout.Milliseconds(), 1), 10))
	return b
}

// fail ends every claim, stops claiming and heartbeating for good, and
// leaves the group so the others stop assigning partitions to this member.
func (m *Member) fail(err error) {
	m.mu.Lock()
	first := m.failure == nil
	if first {
		m.failure = err
	}
	m.mu.Unlock()
	if !first {
		return
	}
	m.log.Error("partition: member failed; handing off all partitions and leaving the group", "err", err)
	m.endAll(err)
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Lease.StatementTimeout)
	defer cancel()
	m.pool.Exec(ctx, m.q.Leave, m.cfg.Group, m.cfg.ID, m.incarnation, m.q.Channel)
}

// listenLoop wakes the reconcile loop on every notification for this
// group, and after every (re)connect of the listener (notifications may
// have been missed meanwhile), until the member stops. The listening
// connection is the process's one for the pool and schema (shared with
// the queue's Processor.Listen: see store.Listen).
func (m *Member) listenLoop() {
	b := backoff.New(100*time.Millisecond, 5*time.Second, m.cfg.Lease.Rand)
	unsubscribe := store.Listen(m.listen, m.schema, &store.Subscriber{
		Channel: m.q.Channel,
		Notify: func(payload string) {
			if m.notified(payload) {
				m.gatherPoke()
			}
		},
		Connected: func() {
			m.listening.Store(true)
			m.fails.Recovered("listen", "partition: listening for notifications again")
			m.poke()
		},
		Failed: func(err error, attempt int) {
			m.listening.Store(false)
			if attempt >= 3 {
				m.fails.Fail("listen", "partition: cannot listen for notifications; relying on polling", "err", err, "attempt", attempt)
			}
		},
		Delay: b.Delay,
	})
	<-m.ctx.Done()
	unsubscribe()
}

// notifyGather is how long a member waits, after a notification of its
// group, for more before it reads the membership: one change makes many
// notifications (a join, then a release from each member that gives the
// joiner partitions), and each woke every member of the fleet for a read
// of its own: at 64 members, about 20,000 reads for 64 joins one after the
// other. Gathered, a member reads once per burst, at the cost of this
// much on each step of a handoff.
const notifyGather = 10 * time.Millisecond

// gatherPoke wakes the reconcile loop notifyGather from now, unless a
// wake is already due then: the notifications of that time share it.
func (m *Member) gatherPoke() {
	if !m.gathering.CompareAndSwap(false, true) {
		return
	}
	m.clock.AfterFunc(notifyGather, func() {
		m.gathering.Store(false)
		m.poke()
	})
}

// reconcileLoop brings this member's claims in line with the assignment
// whenever woken, and at least every readInterval.
func (m *Member) reconcileLoop() {
	for {
		next := m.reconcile()
		m.reportAssignment()
		if !m.wait(next, m.wake) {
			return
		}
	}
}

// readInterval is how long the membership may go unread when nothing else
// (a notification, another member's expiry, a wanted lease's expiry, a
// cooldown) calls for a read: PollInterval while the member cannot listen,
// and while it listens at least the lease TTL. Every change of the
// membership or of a partition's holder that a member must act on before
// its time is notified (a join, a leave, a late release), polled for
// during a handoff (a prompt release: handoffPoll), or an expiry, which
// reconcile schedules. So a read per PollInterval would
// only repeat what the member knows, for every member of a fleet (it was
// the largest share of an idle fleet's statements); the TTL bound is a net
// for a listening connection that dies silently.
func (m *Member) readInterval() time.Duration {
	if m.listening.Load() {
		return max(m.cfg.PollInterval, m.cfg.Lease.TTL)
	}
	return m.cfg.PollInterval
}
