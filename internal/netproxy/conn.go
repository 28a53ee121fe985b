package netproxy

import (
	"context"
	"net"
	"sync"
	"time"
)

// conn is one proxied connection: the accepted client side and, once dialed,
// the server side.
type conn struct {
	client net.Conn
	ctx    context.Context // done once the connection is closed
	cancel context.CancelFunc

	mu     sync.Mutex
	server net.Conn
	closed bool
}

// chunk is a piece of the byte stream and the time it was read.
type chunk struct {
	data []byte
	at   time.Time
}

func newConn(client net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{client: client, ctx: ctx, cancel: cancel}
}

// close closes both sides; it is idempotent.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.cancel()
	_ = c.client.Close()
	if c.server != nil {
		_ = c.server.Close()
	}
}

// setServer attaches the dialed server side, or closes it if c is already
// closed.
func (c *conn) setServer(s net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = s.Close()
		return false
	}
	c.server = s
	return true
}

// handle dials the target (after any blackhole is healed) and forwards bytes
// both ways until either side ends or the connection is closed.
func (p *Proxy) handle(c *conn) {
	defer p.unregister(c)
	defer c.close()
	if !p.waitDial(c) {
		return
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	server, err := d.DialContext(c.ctx, "tcp", p.target)
	if err != nil || !c.setServer(server) {
		return
	}
	p.wg.Go(func() { p.pipe(c, server, c.client) })
	p.pipe(c, c.client, server)
}

// pipe copies src to dst through a queue, applying the proxy's faults to each
// chunk. When src ends, queued chunks are flushed and c is closed.
func (p *Proxy) pipe(c *conn, src, dst net.Conn) {
	defer c.close()
	queue := make(chan chunk, 64)
	p.wg.Go(func() {
		defer close(queue)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				ch := chunk{data: append([]byte(nil), buf[:n]...), at: time.Now()}
				select {
				case queue <- ch:
				case <-c.ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	for ch := range queue {
		if !p.waitForward(c, ch.at) {
			return
		}
		if _, err := dst.Write(ch.data); err != nil {
			return
		}
	}
}
