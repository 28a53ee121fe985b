package main

import (
	"sync"

	"github.com/leasehold/leasehold/fence"
)

// gate is what a demo worker's handlers pass through after applying their
// effect and before returning (and so before their transaction commits).
// Closed, it holds them there, as a frozen process would: ignoring their
// contexts, since a paused process notices nothing.
type gate struct {
	mu      sync.Mutex
	closed  bool
	opened  chan struct{} // closed by open
	blocked []heldRun     // the runs held since the last close
}

// heldRun is one handler run held at a closed gate.
type heldRun struct {
	Job       int64
	Attempt   int
	Partition int
	Token     fence.Token
}

func newGate() *gate { return &gate{opened: make(chan struct{})} }

// pass returns at once while the gate is open; while it is closed, it
// records the run and waits until the gate opens.
func (g *gate) pass(r heldRun) {
	g.mu.Lock()
	if !g.closed {
		g.mu.Unlock()
		return
	}
	g.blocked = append(g.blocked, r)
	c := g.opened
	g.mu.Unlock()
	<-c
}

// close makes handlers wait at the gate from now on.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed, g.opened, g.blocked = true, make(chan struct{}), nil
	}
}

// open lets the held handlers go, and returns the runs that were held.
func (g *gate) open() []heldRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.opened)
	}
	return g.blocked
}

// held returns the runs held since the gate was closed.
func (g *gate) held() []heldRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]heldRun(nil), g.blocked...)
}
