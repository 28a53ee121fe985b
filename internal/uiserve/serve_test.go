package uiserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Serve serves h at URL until its context ends, then returns nil; a second
// Listen on the same address is refused with ErrAddrInUse, naming the flag.
func TestServeAndAddrInUse(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })
	s, err := Listen("127.0.0.1:0", "--addr", h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()

	resp, err := http.Get(s.URL() + "x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello /x" {
		t.Errorf("GET %sx: %q", s.URL(), b)
	}

	addr := strings.TrimSuffix(strings.TrimPrefix(s.URL(), "http://"), "/")
	_, err = Listen(addr, "--ui-addr", h, Options{})
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), "--ui-addr "+addr) {
		t.Errorf("Listen on a used address: %v; want ErrAddrInUse naming --ui-addr %s", err, addr)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after its context ended")
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Serve returned", addr)
	}
}

// A malformed address is an error naming the flag, not ErrAddrInUse.
func TestListenBadAddr(t *testing.T) {
	_, err := Listen("nonsense", "--addr", http.NotFoundHandler(), Options{})
	if err == nil || errors.Is(err, ErrAddrInUse) || !strings.HasPrefix(err.Error(), "--addr nonsense: ") {
		t.Errorf("Listen(nonsense): %v", err)
	}
}
