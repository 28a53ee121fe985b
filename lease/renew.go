package lease

import (
	"context"
	"fmt"
	"time"
)

// renewLoop renews every held lease once per RenewInterval, in one
// statement that skips the rows it cannot lock at once (see renew). The
// leases it skips ("busy": their rows are locked by another transaction,
// typically an effect transaction's fence check) are retried on their own,
// soon and with backoff, until they are renewed, found lost or lost by
// their local deadlines. A failed renewal of all is retried sooner (with
// backoff). The loop also looks at the clock at least every watch, to end
// the leases held across a suspend of the host (checkClock). It exits when
// the Client holds nothing or is closed. Leases whose renewals keep failing
// are lost by their local deadline timers, not by this loop.
func (c *Client) renewLoop() {
	defer c.wg.Done()
	failures, retries := 0, 0
	var busy []*Lease
	var retryAt time.Time // when to retry busy, if any
	next := c.cfg.Clock.Now().Add(c.interval())
	for {
		now := c.cfg.Clock.Now()
		due := next
		if len(busy) > 0 && retryAt.Before(due) {
			due = retryAt
		}
		wait := min(max(due.Sub(now), 0), c.watch)
		if c.loopSleep(wait) != nil {
			return
		}
		ls := c.toRenew()
		if ls == nil {
			if c.loopSlept != nil {
				c.loopSlept(-1)
			}
			return
		}
		r := read(c.cfg.Clock)
		c.checkClock(r)
		switch {
		case !r.mono.Before(next):
			// The renewal of all, due: it covers the busy leases too.
			b, err := c.renew(context.Background(), ls, c.waitingRenew)
			if err != nil {
				failures++
				c.fails.Fail("renew", "lease: renewal failed", "leases", len(ls), "attempt", failures, "err", err)
				next = c.cfg.Clock.Now().Add(min(c.interval(), c.cfg.MinBackoff+c.backoff.Delay(failures)))
				continue
			}
			failures = 0
			c.fails.Recovered("renew", "lease: renewal recovered", "leases", len(ls))
			next = c.cfg.Clock.Now().Add(c.interval())
			busy, retries = b, 0
			c.renewUrgent(busy)
		case len(busy) > 0 && !r.mono.Before(retryAt):
			// The busy leases alone, each still held.
			live := busy[:0]
			for _, l := range busy {
				if l.Err() == nil {
					live = append(live, l)
				}
			}
			busy = live
			if len(busy) > 0 {
				b, err := c.renew(context.Background(), busy, false)
				if err == nil {
					busy = b
				} else {
					c.fails.Fail("renew-busy", "lease: renewal of busy leases failed", "leases", len(busy), "err", err)
				}
				c.renewUrgent(busy)
			}
			retries++
		default:
			continue // a look at the clock only
		}
		if len(busy) > 0 {
			retryAt = c.cfg.Clock.Now().Add(c.cfg.MinBackoff + c.backoff.Delay(retries))
		}
	}
}

// renewUrgent starts a waiting renewal (renewWaiting) of each busy lease
// whose local deadline is less than one RenewInterval away.
func (c *Client) renewUrgent(busy []*Lease) {
	now := c.cfg.Clock.Now()
	for _, l := range busy {
		if l.Deadline().Sub(now) < c.cfg.RenewInterval {
			c.renewWaiting(l)
		}
	}
}

// renewWaiting renews l alone, in the background, with the statement that
// waits for the row's lock (each attempt bounded by StatementTimeout), until
// l is renewed or lost. The loop's retries of a busy lease only sample the
// row: under a steady stream of overlapping FOR SHARE locks (many short
// fence checks of a version before schema 15 on one lease, during a rolling
// upgrade; this version's checks lock FOR KEY SHARE, which a renewal does
// not wait for) they can keep missing the moments it is free,
// and a healthy holder would lose the lease at its local deadline. A
// waiting statement is woken the moment the row is free. It holds no other
// row's lock meanwhile, so the Client's other leases are not held up.
func (c *Client) renewWaiting(l *Lease) {
	if c.noWaitingRenew || !l.waiting.CompareAndSwap(false, true) {
		return
	}
	c.background(func() {
		defer l.waiting.Store(false)
		before := l.Deadline()
		for l.Err() == nil && l.Deadline().Equal(before) {
			if _, err := c.renew(context.Background(), []*Lease{l}, true); err != nil {
				c.fails.Fail("renew-wait", "lease: waiting renewal of a busy lease failed", "lease", l.name, "token", int64(l.token), "err", err)
				if c.sleep(context.Background(), c.cfg.MinBackoff) != nil {
					return
				}
			}
		}
	})
}

// interval returns the wait until the next renewal of all: RenewInterval,
// up to 10% early, so that Clients started together do not renew in
// lockstep; never late.
func (c *Client) interval() time.Duration {
	return c.cfg.RenewInterval - time.Duration(c.backoff.Float64()*float64(c.cfg.RenewInterval/10))
}

// loopSleep is sleep for the renewal loop, which reports to the test hook
// once its timer is set.
func (c *Client) loopSleep(d time.Duration) error {
	return c.sleepArmed(context.Background(), d, func() {
		if c.loopSlept != nil {
			c.loopSlept(d)
		}
	})
}

// toRenew returns the held leases, or nil (and marks the loop stopped) when
// there are none.
func (c *Client) toRenew() []*Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.held) == 0 || c.closed {
		c.renewing = false
		return nil
	}
	ls := make([]*Lease, 0, len(c.held))
	for _, l := range c.held {
		ls = append(ls, l)
	}
	return ls
}

// renew renews ls in one statement. Leases the database confirms get a new
// local deadline counted from when the request was sent; leases it finds
// expired or granted anew are lost. With wait, the statement waits for each
// row's lock (Lease.Renew, one lease); without, it skips the rows it cannot
// lock at once and returns those leases ("busy"): they are neither renewed
// nor lost, and keep their deadlines. On error nothing changes.
//
// Skipping keeps one long effect transaction from costing the Client its
// other leases: a statement that waited for one row's lock would hold the
// locks of the rows it had already locked, stalling their fence checks, and
// would time out, leaving every lease unrenewed. A lease skipped is not
// renewed, so its local deadline does not move: the safety argument (the
// local deadline ends before the database's expiry, and only a confirmed
// renewal moves it) is unchanged.
func (c *Client) renew(ctx context.Context, ls []*Lease, wait bool) (busy []*Lease, err error) {
	// A lease past its local deadline (the process was paused, or the
	// loop's timer fired late) is lost by that deadline, whatever a renewal
	// would find: Err records that, and the lease is not renewed. Err also
	// ends the leases held across a suspend of the host.
	live := ls[:0:0]
	for _, l := range ls {
		if l.Err() == nil {
			live = append(live, l)
		}
	}
	if ls = live; len(ls) == 0 {
		return nil, nil
	}
	names := make([]string, len(ls))
	tokens := make([]int64, len(ls))
	for i, l := range ls {
		names[i], tokens[i] = l.name, int64(l.token)
	}
	ctx, cancel := c.stmtCtx(ctx)
	defer cancel()
	label := names[0]
	if len(names) > 1 {
		label = fmt.Sprintf("%d leases", len(names))
	}
	sql := c.q.RenewSkipLocked
	if wait {
		sql = c.q.Renew
	}
	sent := read(c.cfg.Clock)
	renewed := make(map[string]bool, len(ls)) // name: renewed (true) or busy (false)
	rows, err := c.pool.Query(ctx, sql, names, tokens, c.cfg.Owner, c.cfg.TTL.Microseconds())
	if err == nil {
		for rows.Next() {
			var name string
			var ok bool
			if wait {
				var exp time.Time
				err, ok = rows.Scan(&name, &exp), true
			} else {
				err = rows.Scan(&name, &ok)
			}
			if err != nil {
				break
			}
			renewed[name] = ok
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	latency := c.cfg.Clock.Now().Sub(sent.mono)
	err = classify("renew", label, err)
	n := 0
	for _, ok := range renewed {
		if ok {
			n++
		}
	}
	if f := c.cfg.Hooks.OnRenew; f != nil {
		f(RenewEvent{Owner: c.cfg.Owner, Count: len(ls), Renewed: n, Busy: len(renewed) - n, Latency: latency, Err: err})
	}
	if err != nil {
		return nil, err
	}
	c.log.Debug("lease: renewed", "leases", len(ls), "renewed", n, "busy", len(renewed)-n, "latency", latency)
	for _, l := range ls {
		ok, found := renewed[l.name]
		switch {
		case ok:
			l.extend(sent)
		case found:
			busy = append(busy, l)
		default:
			l.lose(fmt.Errorf("%w: %q token %d: renewal found the lease expired or granted to another owner",
				ErrLost, l.name, l.token), false)
		}
	}
	if len(busy) > 0 {
		c.log.Debug("lease: renewal skipped leases whose rows another transaction has locked; retrying them soon",
			"busy", len(busy))
	}
	return busy, nil
}

// background runs f in a goroutine that Close waits for, unless the Client
// is closed.
func (c *Client) background(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}
