// Package lograte rate-limits the logs of repeated failures: the first
// failure of a kind is logged at once (WARN), later ones at most once per
// interval with a count, and the recovery once (INFO). Every component
// logs its repeated failures through it, one Limiter per component.
package lograte

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is the shortest time between two lines of one kind.
const DefaultInterval = 10 * time.Second

// ErrInvalidConfig is wrapped by the errors of New.
var ErrInvalidConfig = errors.New("lograte: invalid config")

// Config configures a Limiter. The zero value of every field means its
// default.
type Config struct {
	// Interval is the shortest time between two lines of one kind.
	// Defaults to DefaultInterval (10s).
	Interval time.Duration
	// Now reads the clock. Defaults to time.Now.
	Now func() time.Time
	// AfterFunc calls f in its own goroutine once d has passed on Now's
	// clock. Defaults to time.AfterFunc.
	AfterFunc func(d time.Duration, f func())
}

// Limiter logs the failures of one component, per kind (an operation such
// as "renew" or "fetch"):
//
//   - the first failure of a kind, and the first after the kind recovered,
//     is logged at WARN at once, unless a line of the kind was logged less
//     than Interval ago;
//   - the failures not logged are counted, and logged at most once per
//     Interval as one WARN line with the attributes repeated (how many
//     failures it stands for) and over (the time since the kind's previous
//     line), and the arguments of the latest of them;
//   - the first success after a logged failure is logged at INFO with
//     failures (how many in a row) and failing_for.
//
// So a kind logs at most one WARN line per Interval, and no failure goes
// uncounted. A Limiter is safe for concurrent use.
type Limiter struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	after    func(time.Duration, func())

	mu     sync.Mutex
	kinds  map[string]*kind
	closed bool
}

// kind is the state of one kind of failure.
type kind struct {
	lined    bool      // a WARN line of the kind was logged
	lastLine time.Time // ... at this time
	pending  int       // failures not logged yet
	msg      string    // the latest pending failure's message and arguments
	args     []any
	timer    bool // a flush is scheduled

	failing   bool // failures since the last success
	announced bool // ... and a line logged one of them
	streak    int
	since     time.Time
}

// New returns a Limiter logging to log.
func New(log *slog.Logger, cfg Config) (*Limiter, error) {
	if log == nil {
		return nil, fmt.Errorf("%w: nil logger", ErrInvalidConfig)
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("%w: Interval: negative duration %v", ErrInvalidConfig, cfg.Interval)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	return &Limiter{log: log, interval: cfg.Interval, now: cfg.Now, after: cfg.AfterFunc, kinds: make(map[string]*kind)}, nil
}

// Interval returns the shortest time between two lines of one kind.
func (l *Limiter) Interval() time.Duration { return l.interval }

// Fail records a failure of kind: it logs msg with args at WARN now, or
// counts it for a later line (see Limiter).
func (l *Limiter) Fail(kindName, msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kindLocked(kindName)
	now := l.now()
	if !k.failing {
		k.failing, k.announced, k.streak, k.since = true, false, 0, now
	}
	k.streak++
	if l.closed || !k.lined || now.Sub(k.lastLine) >= l.interval {
		n := k.pending + 1
		k.pending, k.msg, k.args = 0, "", nil
		l.lineLocked(k, now, slog.LevelWarn, msg, args, n)
		k.announced = true
		return
	}
	k.pending++
	k.msg, k.args = msg, args
	if !k.timer {
		k.timer = true
		l.after(k.lastLine.Add(l.interval).Sub(now), func() { l.flush(kindName) })
	}
}

// Recovered records a success of kind: if a line logged one of the
// failures since the previous success, it logs msg with args at INFO, with
// failures and failing_for. A success after failures none of whose lines
// were logged yet logs nothing: they are logged by the pending line.
func (l *Limiter) Recovered(kindName, msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.kinds[kindName]
	if !ok || !k.failing {
		return
	}
	k.failing = false
	if !k.announced {
		return
	}
	now := l.now()
	args = append(args[:len(args):len(args)], "failures", k.streak, "failing_for", now.Sub(k.since))
	l.log.Log(context.Background(), slog.LevelInfo, msg, args...)
}

// Close logs every pending count at once; failures recorded after Close
// are logged at once, each.
func (l *Limiter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	now := l.now()
	for _, k := range l.kinds {
		if k.pending > 0 {
			l.lineLocked(k, now, slog.LevelWarn, k.msg, k.args, k.pending)
			k.pending, k.msg, k.args = 0, "", nil
		}
	}
}

// flush logs kind's pending failures once Interval has passed since its
// previous line.
func (l *Limiter) flush(kindName string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.kinds[kindName]
	k.timer = false
	if k.pending == 0 || l.closed {
		return
	}
	now := l.now()
	if wait := k.lastLine.Add(l.interval).Sub(now); wait > 0 {
		k.timer = true
		l.after(wait, func() { l.flush(kindName) })
		return
	}
	l.lineLocked(k, now, slog.LevelWarn, k.msg, k.args, k.pending)
	k.pending, k.msg, k.args = 0, "", nil
	if k.failing {
		k.announced = true
	}
}

// lineLocked logs one line standing for n failures.
func (l *Limiter) lineLocked(k *kind, now time.Time, level slog.Level, msg string, args []any, n int) {
	if k.lined && n > 1 {
		args = append(args[:len(args):len(args)], "repeated", n, "over", now.Sub(k.lastLine))
	} else if n > 1 { // several failures before any line (only at Close)
		args = append(args[:len(args):len(args)], "repeated", n)
	}
	l.log.Log(context.Background(), level, msg, args...)
	k.lined, k.lastLine = true, now
}

func (l *Limiter) kindLocked(name string) *kind {
	k, ok := l.kinds[name]
	if !ok {
		k = &kind{}
		l.kinds[name] = k
	}
	return k
}
