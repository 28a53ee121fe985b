package netproxy

import "time"

// Cut closes every open connection (both sides) and refuses new ones: they
// are accepted and closed at once, until Heal.
func (p *Proxy) Cut() {
	p.setMode(modeCut)
	p.closeAll()
}

// Blackhole keeps connections open but stops forwarding bytes in both
// directions. Bytes are held, not dropped: after Heal they are delivered in
// order. New connections are accepted but held too (the target is not dialed
// until Heal).
func (p *Proxy) Blackhole() {
	p.setMode(modeBlackhole)
}

// Heal restores normal forwarding after Cut or Blackhole; held bytes flow
// again. The latency set by SetLatency is kept.
func (p *Proxy) Heal() {
	p.setMode(modeNormal)
}

// HealOpen ends a Blackhole for the connections already dialed (their held
// bytes flow again) but keeps holding the connections not yet dialed, and
// new ones, until Heal. A test uses it to deliver a request held in a
// blackhole before the cancel request that a client sends on a new
// connection when it gives up waiting (pgconn does so on close), which would
// otherwise race the request it cancels.
func (p *Proxy) HealOpen() {
	p.setMode(modeHoldNew)
}

// SetLatency delays each chunk forwarded in each direction by d, measured
// from when the proxy read it; order is preserved. Zero (or negative) means
// no delay. The new value also applies to chunks already waiting.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = max(d, 0)
	p.notifyLocked()
}

func (p *Proxy) setMode(m mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
	p.notifyLocked()
}

// notifyLocked wakes every goroutine waiting in wait. p.mu must be
// held.
func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitForward blocks until a chunk read at time at may be forwarded on c:
// the proxy is neither blackholed nor cut and at+latency has passed. It
// reports false if c or the proxy is closed, or the proxy is cut.
func (p *Proxy) waitForward(c *conn, at time.Time) bool {
	return p.wait(c, at, false)
}

// waitDial blocks until c's target may be dialed: as waitForward, but
// HealOpen keeps holding it.
func (p *Proxy) waitDial(c *conn) bool {
	return p.wait(c, time.Time{}, true)
}

func (p *Proxy) wait(c *conn, at time.Time, dial bool) bool {
	for {
		p.mu.Lock()
		m, lat, closed, changed := p.mode, p.latency, p.closed, p.changed
		p.mu.Unlock()
		if closed || m == modeCut || c.ctx.Err() != nil {
			return false
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if m == modeNormal || (m == modeHoldNew && !dial) {
			d := time.Until(at.Add(lat))
			if d <= 0 {
				return true
			}
			timer = time.NewTimer(d)
			fire = timer.C
		}
		select {
		case <-fire:
		case <-changed:
		case <-c.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
	}
}
