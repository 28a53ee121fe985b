package partition

import (
	"context"
	"sync"

	"github.com/leasehold/leasehold/lease"
)

// The releaser releases the partitions a member hands off in one statement
// and wakes the other members with one notification, instead of a
// statement and a notification per partition: a rebalance that moves many
// of a member's partitions, or a Stop, ends many Runs at once. The first
// handoff after a quiet spell is released at once; the ones that come
// while a statement runs are released together by the next. (Released one
// by one, the 1,008 partitions the first of 64 members starting together
// had to give back queued for the member's few connections past their
// statement timeout, and each unconfirmed release left its partition
// unowned until its lease expired: a TTL.)
//
// A goroutine runs only while releases wait.
type releaser struct {
	m *Member

	mu      sync.Mutex
	pending []pendingRelease
	running bool
}

// pendingRelease is one lease to release and what to do once the
// statement returned (err: its error).
type pendingRelease struct {
	l    *lease.Lease
	then func(err error)
}

// add releases l with the others pending, then calls then.
func (r *releaser) add(l *lease.Lease, then func(err error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, pendingRelease{l, then})
	if !r.running {
		r.running = true
		go r.loop()
	}
}

// loop releases what is pending, a statement at a time, until nothing is.
func (r *releaser) loop() {
	for {
		r.mu.Lock()
		batch := r.pending
		r.pending = nil
		if len(batch) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		ls := make([]*lease.Lease, len(batch))
		for i, p := range batch {
			ls[i] = p.l
		}
		m := r.m
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Lease.StatementTimeout)
		err := m.leases.ReleaseMany(ctx, ls...)
		if err == nil {
			m.notify(ctx)
		}
		cancel()
		for _, p := range batch {
			p.then(err)
		}
	}
}
