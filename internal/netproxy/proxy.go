package netproxy

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"time"
)

// mode is the fault currently applied by a Proxy.
type mode int

const (
	modeNormal mode = iota
	modeBlackhole
	modeCut
	modeHoldNew // open connections forward; new ones are held undialed
)

// Proxy forwards TCP connections from a loopback listener to a target address.
// Faults (Cut, Blackhole, HealOpen, SetLatency) can be switched on and off at any time
// from any goroutine; Heal restores normal forwarding.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	mode    mode
	latency time.Duration
	closed  bool
	changed chan struct{} // closed and replaced on every state change
	conns   map[*conn]struct{}

	closeOnce sync.Once
}

// Start listens on 127.0.0.1:0 and forwards every accepted connection to
// target, until Close is called.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		target:  target,
		ln:      ln,
		changed: make(chan struct{}),
		conns:   make(map[*conn]struct{}),
	}
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr returns the proxy's listening address, "127.0.0.1:port".
func (p *Proxy) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port()))
}

// Port returns the proxy's listening port.
func (p *Proxy) Port() int {
	if a, ok := p.ln.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Close stops listening, closes all connections and waits for every
// goroutine of the proxy to return. It is safe to call more than once; later
// calls return nil.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.notifyLocked()
		p.mu.Unlock()
		err = p.ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return err
}

// acceptLoop accepts client connections until the listener is closed.
func (p *Proxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.isClosed() {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. too many open files
			continue
		}
		c := newConn(client)
		if !p.register(c) {
			c.close()
			continue
		}
		p.wg.Go(func() { p.handle(c) })
	}
}

// register tracks c unless the proxy is closed or cut.
func (p *Proxy) register(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == modeCut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) unregister(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// closeAll closes every tracked connection, both sides.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
}
