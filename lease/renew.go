package lease

import (
	"context"
	"fmt"
	"time"
)

// renewLoop renews every held lease once per RenewInterval, in one
// statement. It retries a failed renewal sooner (with backoff) and exits when
// the Client holds nothing or is closed. Leases whose renewals keep failing
// are lost by their local deadline timers, not by this loop.
func (c *Client) renewLoop() {
	defer c.wg.Done()
	failures := 0
	for {
		// Up to 10% early, so that Clients started together do not renew in
		// lockstep; never late.
		wait := c.cfg.RenewInterval - time.Duration(c.backoff.Float64()*float64(c.cfg.RenewInterval/10))
		if failures > 0 {
			wait = min(wait, c.cfg.MinBackoff+c.backoff.Delay(failures))
		}
		if c.sleep(context.Background(), wait) != nil {
			return
		}
		ls := c.toRenew()
		if ls == nil {
			return
		}
		err := c.renew(context.Background(), ls)
		if err != nil {
			failures++
			c.fails.Fail("renew", "lease: renewal failed", "leases", len(ls), "attempt", failures, "err", err)
		} else {
			failures = 0
			c.fails.Recovered("renew", "lease: renewal recovered", "leases", len(ls))
		}
	}
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
// local deadline counted from when the request was sent; leases it does not
// return are lost. On error nothing changes.
func (c *Client) renew(ctx context.Context, ls []*Lease) error {
	// A lease past its local deadline (the process was paused, say) is lost
	// by that deadline, whatever a renewal would find: Err records that, and
	// the lease is not renewed.
	live := ls[:0:0]
	for _, l := range ls {
		if l.Err() == nil {
			live = append(live, l)
		}
	}
	if ls = live; len(ls) == 0 {
		return nil
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
	sent := c.cfg.Clock.Now()
	renewed := make(map[string]bool, len(ls))
	rows, err := c.pool.Query(ctx, c.q.Renew, names, tokens, c.cfg.Owner, c.cfg.TTL.Microseconds())
	if err == nil {
		for rows.Next() {
			var name string
			var exp time.Time
			if err = rows.Scan(&name, &exp); err != nil {
				break
			}
			renewed[name] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	latency := c.cfg.Clock.Now().Sub(sent)
	err = classify("renew", label, err)
	if f := c.cfg.Hooks.OnRenew; f != nil {
		f(RenewEvent{Owner: c.cfg.Owner, Count: len(ls), Renewed: len(renewed), Latency: latency, Err: err})
	}
	if err != nil {
		return err
	}
	c.log.Debug("lease: renewed", "leases", len(ls), "renewed", len(renewed), "latency", latency)
	for _, l := range ls {
		if renewed[l.name] {
			l.extend(sent)
		} else {
			l.lose(fmt.Errorf("%w: %q token %d: renewal found the lease expired or granted to another owner",
				ErrLost, l.name, l.token), false)
		}
	}
	return nil
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
