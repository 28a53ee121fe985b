package partition

import (
	"context"

	"github.com/leasehold/leasehold/internal/gather"
	"github.com/leasehold/leasehold/lease"
)

// A member releases the partitions it hands off in one statement and wakes
// the members that want them with one notification (whose payload names
// the partitions: see notify.go), gathered by a gather.Batcher (the first
// handoff after a quiet spell at once, the ones that come while a
// statement runs together in the next), instead of a statement and a
// notification per partition: a rebalance that moves many of a member's
// partitions, or a Stop, ends many Runs at once. (Released one by one, the
// 1,008 partitions the first of 64 members starting together had to give
// back queued for the member's few connections past their statement
// timeout, and each unconfirmed release left its partition unowned until
// its lease expired: a TTL.)

// pendingRelease is one lease to release and what to do once the
// statement returned (err: its error).
type pendingRelease struct {
	p    int // the partition
	l    *lease.Lease
	then func(err error)
}

// newReleaser returns m's releaser.
func newReleaser(m *Member) *gather.Batcher[pendingRelease] {
	return &gather.Batcher[pendingRelease]{Send: m.release}
}

// release releases batch's leases in one statement, notifies the other
// members, and answers each.
func (m *Member) release(batch []*pendingRelease) {
	ls := make([]*lease.Lease, len(batch))
	parts := make([]int, len(batch))
	for i, p := range batch {
		ls[i], parts[i] = p.l, p.p
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Lease.StatementTimeout)
	err := m.leases.ReleaseMany(ctx, ls...)
	if err == nil {
		m.notifyReleased(ctx, parts)
	}
	cancel()
	for _, p := range batch {
		p.then(err)
	}
}
