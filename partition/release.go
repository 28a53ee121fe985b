package partition

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/gather"
	"github.com/leasehold/leasehold/lease"
)

// A member releases the partitions it hands off in one statement, gathered by a gather.Batcher (the first
// handoff after a quiet spell at once, the ones that come while a
// statement runs together in the next), instead of a statement and a
// notification per partition: a rebalance that moves many of a member's
// partitions, or a Stop, ends many Runs at once. (Released one by one, the
// 1,008 partitions the first of 64 members starting together had to give
// back queued for the member's few connections past their statement
// timeout, and each unconfirmed release left its partition unowned until
// its lease expired: a TTL.)
//
// The release wakes the members that want the partitions with one
// notification (whose payload names them: see notify.go) only when they
// may not be looking: when this member leaves (Stop, or a failure), its
// partitions go to members that learn of the leave before the release;
// and when a Run took longer than lateRelease to return. A rebalance's
// prompt release needs none: the new owner saw the same change of the
// membership and tries to claim the partition every 25 ms for a while
// (handoffPoll). A notification is not cheap: PostgreSQL 15 signals every
// listening backend of the database for each, whatever its channel, and a
// join made one at each member giving the joiner a partition: 64 members
// started one after the other sent about 1,440 of them, and each woke the
// 64 listening connections (about a quarter of the server's CPU time).

// lateRelease is the time after which a release notifies (Run's context
// ended this long before, or more). handoffPoll polls quickly for four
// times as long.
const lateRelease = 100 * time.Millisecond

// pendingRelease is one lease to release and what to do once the
// statement returned (err: its error).
type pendingRelease struct {
	p    int // the partition
	l    *lease.Lease
	late bool // its Run took lateRelease or longer to return
	then func(err error)
}

// newReleaser returns m's releaser.
func newReleaser(m *Member) *gather.Batcher[pendingRelease] {
	return &gather.Batcher[pendingRelease]{Send: m.release}
}

// release releases batch's leases in one statement, notifies the members
// that want them when they may not be looking (see above), and answers
// each.
func (m *Member) release(batch []*pendingRelease) {
	ls := make([]*lease.Lease, len(batch))
	parts := make([]int, len(batch))
	notify := m.leaving()
	for i, p := range batch {
		ls[i], parts[i] = p.l, p.p
		notify = notify || p.late
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Lease.StatementTimeout)
	err := m.leases.ReleaseMany(ctx, ls...)
	if err == nil && notify {
		m.notifyReleased(ctx, parts)
	}
	cancel()
	for _, p := range batch {
		p.then(err)
	}
}

// leaving reports whether this member is leaving the group: stopping, or
// failed.
func (m *Member) leaving() bool {
	return m.ctx.Err() != nil || m.Err() != nil
}
