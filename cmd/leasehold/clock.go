package main

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
)

// pausableClock drives a fake clock in step with real time until paused.
// The lease Client using it then sees time stand still: it neither renews
// nor notices its deadline, exactly like a process stopped by a long GC
// pause, SIGSTOP or a VM migration.
type pausableClock struct {
	*fakeclock.Clock

	mu     sync.Mutex
	last   time.Time // the real time the fake clock last caught up with
	paused bool

	stop, done chan struct{}
}

// tick is how often the fake clock catches up with real time.
const tick = 50 * time.Millisecond

func newPausableClock() *pausableClock {
	now := time.Now()
	p := &pausableClock{Clock: fakeclock.New(now), last: now, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *pausableClock) run() {
	defer close(p.done)
	t := time.NewTicker(tick)
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
func (p *pausableClock) catchUpLocked() time.Duration {
	now := time.Now()
	d := now.Sub(p.last)
	p.Clock.Advance(d)
	p.last = now
	return d
}

// pause stops the fake clock.
func (p *pausableClock) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.catchUpLocked()
	p.paused = true
}

// resume advances the fake clock by the time it stood still, firing the
// timers that came due meanwhile, and keeps it in step with real time again.
// It returns how long the clock stood still.
func (p *pausableClock) resume() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	return p.catchUpLocked()
}

// close stops driving the fake clock.
func (p *pausableClock) close() {
	close(p.stop)
	<-p.done
}
