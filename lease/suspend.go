package lease

import "log/slog"

// checkClock ends, as lost with a *SuspendError, every lease whose wall
// clock has run more than jumpLimit ahead of its monotonic clock since the
// lease's deadline base was sent: the leases held across a suspend of the
// host. It is called by every look at the clock that finds such a jump
// (Err, the deadline timers, the replies of renewals and acquires) and by
// the renewal loop at least every watch, so that Done closes soon after a
// resume even if nobody calls Err.
//
// A forward step of the wall clock (NTP) looks exactly like a suspend and
// ends the leases too: a false loss, the safe direction. A backward step is
// ignored: a suspend only ever puts the wall clock ahead, the local
// deadlines count on the monotonic clock, which no wall step moves, and the
// database never sees the local wall clock. (A backward step right after a
// suspend hides as much of it as it steps back: the detector sees the net
// jump.)
func (c *Client) checkClock(now reading) {
	var ended []*Lease
	var worst SuspendError
	for _, l := range c.Held() {
		jump := l.jumped(now)
		if jump <= c.jumpLimit {
			continue
		}
		if l.lose(&SuspendError{Name: l.name, Token: l.token, Jump: jump, Limit: c.jumpLimit}, true) {
			ended = append(ended, l)
			worst.Jump = max(worst.Jump, jump)
		}
	}
	if len(ended) > 0 {
		c.log.Warn("lease: the wall clock ran ahead of the monotonic clock (host suspended?): leases held across it are lost",
			slog.Int("leases", len(ended)), slog.Duration("jump", worst.Jump), slog.Duration("limit", c.jumpLimit))
	}
}
