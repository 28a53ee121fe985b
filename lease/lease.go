package lease

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/fence"
)

// Lease is one grant of a named lease to a Client. It stays valid until it
// is released or lost; then Done is closed and Err says why. A Lease is
// never valid again after that: acquire the name anew for a new grant, with
// a new token.
type Lease struct {
	c          *Client
	name       string
	token      fence.Token
	acquiredAt time.Time // database clock
	granted    time.Time // local clock: when the acquire was sent
	ctx        context.Context
	cancel     context.CancelCauseFunc

	mu       sync.Mutex
	base     reading   // when the acquire or renewal the deadline counts from was sent
	deadline time.Time // local clock: trust the lease until then (base.mono + TTL - SafetyMargin)
	timer    Timer
	done     bool
	released bool // a release statement succeeded

	waiting atomic.Bool // a waiting renewal of this lease alone runs: see Client.renewWaiting
}

func newLease(c *Client, name string, token fence.Token, acquiredAt time.Time, sent reading) *Lease {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Lease{
		c: c, name: name, token: token, acquiredAt: acquiredAt, granted: sent.mono,
		ctx: ctx, cancel: cancel,
		base: sent, deadline: sent.mono.Add(c.cfg.TTL - c.cfg.SafetyMargin),
	}
}

// Name returns the lease's name.
func (l *Lease) Name() string { return l.name }

// Owner returns the owner id of the Client holding the lease.
func (l *Lease) Owner() string { return l.c.cfg.Owner }

// Token returns the fencing token of this grant. Carry it in every write
// the lease protects, so the resource can refuse a write from a holder
// whose grant has been superseded.
func (l *Lease) Token() fence.Token { return l.token }

// AcquiredAt returns when the database granted the lease, by its clock.
func (l *Lease) AcquiredAt() time.Time { return l.acquiredAt }

// Deadline returns the local time until which the holder may trust the
// lease, given the renewals confirmed so far. Past it, the lease is lost.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel closed the moment the holder can no longer be sure
// it holds the lease, or once it is released.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the lease is held; afterwards an error wrapping
// ErrLost (with the reason) or ErrReleased. Err checks the local deadline
// itself: past it, the lease is lost at once, even before the deadline
// timer has run. It also checks the clock for a suspend of the host: if the
// wall clock has run ahead of the monotonic clock by more than half the
// SafetyMargin since the lease's last confirmed renewal was sent, every
// lease the Client held across the jump is lost at once, with a
// *SuspendError (wrapping ErrLost and ErrSuspended).
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		now := read(l.c.cfg.Clock)
		l.mu.Lock()
		done, jumped, passed := l.done, l.base.jump(now) > l.c.jumpLimit, !now.mono.Before(l.deadline)
		l.mu.Unlock()
		switch {
		case done:
		case jumped:
			l.c.checkClock(now)
		case passed:
			l.checkDeadline()
		default:
			return nil
		}
	}
	return context.Cause(l.ctx)
}

// Context returns a context cancelled, with Err as its cause, when the lease
// is lost or released. Run the work the lease protects under it.
func (l *Lease) Context() context.Context { return l.ctx }

// arm starts the local deadline timer.
func (l *Lease) arm() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.timer = l.c.cfg.Clock.AfterFunc(l.deadline.Sub(l.c.cfg.Clock.Now()), l.checkDeadline)
	}
}

// checkDeadline runs when the local deadline timer fires. A renewal may have
// moved the deadline since the timer was set; then it waits again. A clock
// jump (a suspend) ends the lease, and every other one held across it.
func (l *Lease) checkDeadline() {
	now := read(l.c.cfg.Clock)
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	if l.base.jump(now) > l.c.jumpLimit {
		l.mu.Unlock()
		l.c.checkClock(now)
		return
	}
	if now.mono.Before(l.deadline) {
		l.timer = l.c.cfg.Clock.AfterFunc(l.deadline.Sub(now.mono), l.checkDeadline)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.lose(fmt.Errorf("%w: %q token %d: no renewal confirmed before the local deadline", ErrLost, l.name, l.token), true)
}

// extend moves the local deadline after a renewal whose request was sent at
// sent. If the deadline passed before the reply arrived, or the host was
// suspended since the deadline's base was sent, the lease is lost now: a
// late success does not revive it.
func (l *Lease) extend(sent reading) {
	now := read(l.c.cfg.Clock)
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	if l.base.jump(now) > l.c.jumpLimit || !now.mono.Before(l.deadline) {
		l.mu.Unlock()
		l.checkDeadline()
		return
	}
	if d := sent.mono.Add(l.c.cfg.TTL - l.c.cfg.SafetyMargin); d.After(l.deadline) {
		l.deadline, l.base = d, sent
	}
	l.mu.Unlock()
}

// jumped returns how much further the wall clock has advanced than the
// monotonic clock since the lease's deadline base was sent, as of now.
func (l *Lease) jumped(now reading) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.base.jump(now)
}

// finish marks the lease done with cause and reports whether this call did.
func (l *Lease) finish(cause error) bool {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return false
	}
	l.done = true
	if l.timer != nil {
		l.timer.Stop()
	}
	// Cancel before unlocking: Err, which reads done under mu, must find
	// the context's cause set once done is (it returned nil for a lost
	// lease in between).
	l.cancel(cause)
	l.mu.Unlock()
	l.c.untrack(l)
	return true
}

// lose marks the lease lost and reports whether this call did. With
// release, it also tries (in the background, token-checked) to free the row
// in case the database still shows it held, so that others need not wait
// for it to expire.
func (l *Lease) lose(cause error, release bool) bool {
	if !l.finish(cause) {
		return false
	}
	held := l.c.cfg.Clock.Now().Sub(l.granted)
	l.c.fails.Fail("lost", "lease: lost", "lease", l.name, "token", int64(l.token), "held", held, "err", cause)
	if f := l.c.cfg.Hooks.OnLoss; f != nil {
		f(LossEvent{Name: l.name, Owner: l.c.cfg.Owner, Token: l.token, Held: held, Err: cause})
	}
	if release {
		l.c.background(func() {
			ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.StatementTimeout)
			defer cancel()
			l.release(ctx)
		})
	}
	return true
}

// Renew renews this lease now, in addition to the Client's background
// renewals. It returns Err if the lease is already lost or released, an
// error wrapping ErrLost if the database no longer shows this grant as held,
// or the database error (the lease stays valid until its local deadline).
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	if _, err := l.c.renew(ctx, []*Lease{l}, true); err != nil {
		return err
	}
	return l.Err()
}

// Release gives the lease up so another owner can acquire it at once. The
// lease is done when Release returns, whatever the outcome; an error means
// the database did not confirm the release, and the row then frees itself
// when it expires. Release checks owner and token, so releasing twice, or
// after the lease was lost, is harmless.
func (l *Lease) Release(ctx context.Context) error {
	l.finish(ErrReleased)
	return l.release(ctx)
}

// ReleaseMany is Release for several leases of this Client, in one
// statement (a member handing off many partitions at once sends one, not
// one each): every lease is done when it returns, and an error means the
// database did not confirm the release of any of them (they then free
// themselves when they expire). Leases already released or lost are
// skipped; a lease of another Client is an ErrInvalidConfig error, and
// then none is released.
func (c *Client) ReleaseMany(ctx context.Context, ls ...*Lease) error {
	for _, l := range ls {
		if l == nil || l.c != c {
			return fmt.Errorf("%w: ReleaseMany of a lease of another Client", ErrInvalidConfig)
		}
	}
	var todo []*Lease
	for _, l := range ls {
		l.finish(ErrReleased)
		l.mu.Lock()
		if !l.released {
			todo = append(todo, l)
		}
		l.mu.Unlock()
	}
	return c.release(ctx, todo)
}

// release releases the leases todo, none of which is released yet, in one
// statement (the single-lease one for one lease), and records the outcome
// on each: released, logged, OnRelease.
func (c *Client) release(ctx context.Context, todo []*Lease) error {
	if len(todo) == 0 {
		return nil
	}
	names := make([]string, len(todo))
	tokens := make([]int64, len(todo))
	for i, l := range todo {
		names[i], tokens[i] = l.name, int64(l.token)
	}
	ctx, cancel := c.stmtCtx(ctx)
	defer cancel()
	start := c.cfg.Clock.Now()
	var err error
	what := names[0]
	if len(todo) == 1 {
		_, err = c.pool.Exec(ctx, c.q.Release, names[0], c.cfg.Owner, tokens[0])
	} else {
		_, err = c.pool.Exec(ctx, c.q.ReleaseMany, names, tokens, c.cfg.Owner)
		what = fmt.Sprintf("%s and %d more", names[0], len(names)-1)
	}
	err = classify("release", what, err)
	latency := c.cfg.Clock.Now().Sub(start)
	if err == nil {
		for _, l := range todo {
			l.mu.Lock()
			l.released = true
			l.mu.Unlock()
		}
		c.log.Debug("lease: released", "lease", what, "token", tokens[0], "leases", len(todo), "latency", latency)
		c.fails.Recovered("release", "lease: releases confirmed again")
	} else {
		c.fails.Fail("release", "lease: release not confirmed; the lease frees itself at expiry",
			"lease", what, "token", tokens[0], "leases", len(todo), "err", err)
	}
	if f := c.cfg.Hooks.OnRelease; f != nil {
		for _, l := range todo {
			f(ReleaseEvent{Name: l.name, Owner: c.cfg.Owner, Token: l.token, Held: start.Sub(l.granted), Latency: latency, Err: err})
		}
	}
	return err
}

// release releases l unless a release of it was confirmed already.
func (l *Lease) release(ctx context.Context) error {
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return nil
	}
	return l.c.release(ctx, []*Lease{l})
}
