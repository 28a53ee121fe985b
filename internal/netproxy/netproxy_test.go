package netproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// startEcho starts a TCP echo server on 127.0.0.1 and returns its address.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c); _ = c.Close() })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func startProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(startEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// roundTrip writes msg and reads it back, failing the test on error.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	expectRead(t, c, msg)
}

func expectRead(t *testing.T, c net.Conn, want string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	n, err := io.ReadFull(c, got)
	if err != nil {
		t.Fatalf("read: %v after %d of %d bytes", err, n, len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("byte %d of %d differs; got %q..., want %q...", i, len(want), clip(got[i:]), clip([]byte(want[i:])))
		}
	}
}

// expectClosed asserts that a read on c fails quickly with something other
// than a timeout (EOF or reset).
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 16))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read on closed connection: n=%d err=%v, want EOF or reset", n, err)
	}
}

// expectNothing asserts that nothing arrives on c within d.
func expectNothing(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	n, err := c.Read(make([]byte, 16))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read during blackhole: n=%d err=%v, want timeout", n, err)
	}
}

func TestRoundTrip(t *testing.T) {
	p := startProxy(t)
	if p.Port() == 0 || p.Addr() != net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port())) {
		t.Fatalf("Addr %q, Port %d", p.Addr(), p.Port())
	}
	c := dial(t, p)
	roundTrip(t, c, "hello")

	// A large payload, written while reading, comes back intact and in order.
	big := counting(1 << 20)
	go func() { _, _ = c.Write(big) }()
	got := make([]byte, len(big))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("large payload corrupted")
	}
}

func TestCut(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	roundTrip(t, c, "before")

	p.Cut()
	expectClosed(t, c)
	fresh := dial(t, p) // accepted, then closed at once
	expectClosed(t, fresh)

	p.Heal()
	roundTrip(t, dial(t, p), "after")
}

func TestBlackhole(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	roundTrip(t, c, "before")

	p.Blackhole()
	for _, s := range []string{"one,", "two,", "three"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	fresh := dial(t, p) // accepted but held
	if _, err := fresh.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, c, 200*time.Millisecond)
	expectNothing(t, fresh, 50*time.Millisecond)

	p.Heal()
	expectRead(t, c, "one,two,three")
	expectRead(t, fresh, "new")
	roundTrip(t, c, "after")

	// Many chunks held at once are still delivered in order after Heal.
	p.Blackhole()
	big := counting(1 << 20)
	go func() { _, _ = c.Write(big) }()
	expectNothing(t, c, 100*time.Millisecond)
	p.Heal()
	expectRead(t, c, string(big))
}

// HealOpen delivers what open connections held but keeps holding the
// connections accepted during the blackhole, and new ones, until Heal.
func TestHealOpen(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	roundTrip(t, c, "before")

	p.Blackhole()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	during := dial(t, p) // accepted during the blackhole
	if _, err := during.Write([]byte("during")); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, c, 100*time.Millisecond)

	p.HealOpen()
	expectRead(t, c, "held")
	roundTrip(t, c, "open")
	after := dial(t, p)
	if _, err := after.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, during, 200*time.Millisecond)
	expectNothing(t, after, 50*time.Millisecond)

	p.Heal()
	expectRead(t, during, "during")
	expectRead(t, after, "after")
}

// counting returns n bytes of big-endian uint32 counters, so that any
// reordering of chunks is detectable.
func counting(n int) []byte {
	b := make([]byte, 0, n)
	for i := uint32(0); len(b) < n; i++ {
		b = binary.BigEndian.AppendUint32(b, i)
	}
	return b
}

func TestLatency(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	roundTrip(t, c, "warm")

	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	roundTrip(t, c, "slow")
	if rtt := time.Since(start); rtt < 90*time.Millisecond {
		t.Fatalf("round trip with 100ms latency took %v, want >= 90ms", rtt)
	}

	// SetLatency(0) releases even a chunk already waiting out a long delay.
	p.SetLatency(time.Hour)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	p.SetLatency(0)
	expectRead(t, c, "held")
	roundTrip(t, c, "fast")
}

func TestClose(t *testing.T) {
	p := startProxy(t)
	c := dial(t, p)
	roundTrip(t, c, "hi")
	p.Blackhole()
	held := dial(t, p) // a held connection must not block Close

	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	expectClosed(t, c)
	expectClosed(t, held)
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = c2.Close()
		t.Fatal("dial after Close succeeded, want refused")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	p.Heal() // must not panic after Close
	p.Cut()
}

// TestConcurrentFaults flips faults while traffic flows, for the race
// detector; it asserts only that nothing hangs and Close returns.
func TestConcurrentFaults(t *testing.T) {
	p := startProxy(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(50 * time.Millisecond))
				_, _ = c.Write([]byte("x"))
				_, _ = c.Read(make([]byte, 1))
				_ = c.Close()
			}
		})
	}
	wg.Go(func() {
		for i := range 40 {
			switch i % 4 {
			case 0:
				p.Cut()
			case 1:
				p.Blackhole()
			case 2:
				p.SetLatency(time.Duration(i) * time.Millisecond)
			default:
				p.Heal()
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func clip(b []byte) []byte { return b[:min(len(b), 16)] }
