package chaos

import "sync"

// HandlerRun is one handler run as a WorkerEnv's Hold hook sees it: its
// effect written in its transaction, the commit not yet made.
type HandlerRun struct {
	// Job is the queue job; 0 for a Kafka batch.
	Job int64
	// Partition is the group partition the run belongs to.
	Partition int
	// Token is the fencing token the run commits under.
	Token int64
	// First and Last are a Kafka batch's first and last offsets.
	First, Last int64
}

// Gate is what an in-process Member's handlers pass through after writing
// their effect and before returning (and so before their transaction
// commits). Closed, it holds them there, as a frozen process would:
// ignoring their contexts, since a paused process notices nothing.
type Gate struct {
	mu      sync.Mutex
	closed  bool
	opened  chan struct{} // closed by Open
	blocked []HandlerRun  // the runs held since the last Close
}

// NewGate returns an open gate.
func NewGate() *Gate { return &Gate{opened: make(chan struct{})} }

// Pass returns at once while the gate is open; while it is closed, it
// records the run and waits until the gate opens.
func (g *Gate) Pass(r HandlerRun) {
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

// Close makes handlers wait at the gate from now on.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed, g.opened, g.blocked = true, make(chan struct{}), nil
	}
}

// Open lets the held handlers go, and returns the runs that were held.
func (g *Gate) Open() []HandlerRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.opened)
	}
	return g.blocked
}

// Held returns the runs held since the gate was closed.
func (g *Gate) Held() []HandlerRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]HandlerRun(nil), g.blocked...)
}
