package chaos

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
)

// PausableClock drives a fake clock in step with real time until paused.
// The lease Client using it then sees time stand still: it neither renews
// nor notices its deadline, exactly like a process stopped by a long GC
// pause, SIGSTOP or a VM migration. It is an in-process Member's clock; a
// worker process's is a SkewClock.
type PausableClock struct {
	*fakeclock.Clock

	mu     sync.Mutex
	last   time.Time // the real time the fake clock last caught up with
	paused bool

	stop, done chan struct{}
}

// clockTick is how often a PausableClock catches up with real time.
const clockTick = 50 * time.Millisecond

// NewPausableClock returns a running clock; Close stops driving it.
func NewPausableClock() *PausableClock {
	now := time.Now()
	p := &PausableClock{Clock: fakeclock.New(now), last: now, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *PausableClock) run() {
	defer close(p.done)
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if !p.paused {
				p.catchUpLocked()
			}
			p.mu.Unlock()
		}
	}
}

// catchUpLocked advances the fake clock by the real time elapsed since it
// last did and returns that duration.
func (p *PausableClock) catchUpLocked() time.Duration {
	now := time.Now()
	d := now.Sub(p.last)
	p.Clock.Advance(d)
	p.last = now
	return d
}

// Pause stops the fake clock.
func (p *PausableClock) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.catchUpLocked()
	p.paused = true
}

// Resume advances the fake clock by the time it stood still, firing the
// timers that came due meanwhile, and keeps it in step with real time again.
// It returns how long the clock stood still.
func (p *PausableClock) Resume() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	return p.catchUpLocked()
}

// Close stops driving the fake clock.
func (p *PausableClock) Close() {
	close(p.stop)
	<-p.done
}
