package uiserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serve starts a server on addr for a handler recording what reaches it,
// and returns its URL and the count of requests that reached the handler.
func serve(t *testing.T, addr string, o Options) (string, func() int) {
	t.Helper()
	reached := make(chan struct{}, 100)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{}
		io.WriteString(w, "page of "+r.Host)
	})
	s, err := Listen(addr, "--addr", h, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s.URL(), func() int { return len(reached) }
}

// do sends method to u with Host host, as a browser on a rebound name
// would (Sec-Fetch-Site same-origin, Origin of the host), and returns the
// status.
func do(t *testing.T, method, u, host string) int {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(url.Values{"id": {"1"}, "csrf": {"x"}}.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", "http://"+host)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// DNS rebinding: on a loopback address, a request naming another host
// (evil.example, rebound to 127.0.0.1) is answered 421 and never reaches
// the UI, whether a GET of a page or a POST of an action; the loopback
// names, with the bound port or none, are served. The negative control:
// the same forged requests reach a handler not behind the check.
func TestLoopbackRefusesOtherHosts(t *testing.T) {
	base, reached := serve(t, "127.0.0.1:0", Options{})
	u, _ := url.Parse(base)
	port := u.Port()
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port, "localhost:1" + port,
		"localhost.:" + port} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			if code := do(t, m, base+"actions/cancel", host); code != http.StatusMisdirectedRequest {
				t.Errorf("%s with Host %q: %d; want 421", m, host, code)
			}
		}
	}
	if n := reached(); n != 0 {
		t.Fatalf("%d forged requests reached the handler", n)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port, "localhost", "127.0.0.1", "[::1]"} {
		if code := do(t, http.MethodGet, base, host); code != http.StatusOK {
			t.Errorf("GET with Host %q: %d; want 200", host, code)
		}
	}

	// The check is what refuses them: without it (the handler alone,
	// hostCheck nil) the forged request is served.
	c, err := newHostCheck(&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 1}, nil)
	if err != nil || c != nil {
		t.Fatalf("a non-loopback address with no allowed host: check %v, %v; want none", c, err)
	}
	if c, _ := newHostCheck(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}, nil); c.allows("evil.example:8080") || c.allows("") {
		t.Error("the loopback check allows evil.example:8080 or an empty Host")
	}
}

// --allowed-host adds names: "name" with any port or none, "name:port"
// with that port only; on a non-loopback address they are the only names
// served.
func TestAllowedHosts(t *testing.T) {
	base, _ := serve(t, "127.0.0.1:0", Options{AllowedHosts: []string{"Queue.Example.com", "ops.example:8443"}})
	port, _ := url.Parse(base)
	for host, want := range map[string]int{
		"queue.example.com":        http.StatusOK,
		"queue.example.com:443":    http.StatusOK,
		"ops.example:8443":         http.StatusOK,
		"ops.example":              http.StatusMisdirectedRequest,
		"ops.example:443":          http.StatusMisdirectedRequest,
		"evil.example":             http.StatusMisdirectedRequest,
		"localhost:" + port.Port(): http.StatusOK,
	} {
		if code := do(t, http.MethodGet, base, host); code != want {
			t.Errorf("GET with Host %q: %d; want %d", host, code, want)
		}
	}
	c, err := newHostCheck(&net.TCPAddr{IP: net.ParseIP("10.0.0.5"), Port: 80}, []string{"queue.example.com"})
	if err != nil || c == nil || c.allows("10.0.0.5:80") || !c.allows("queue.example.com") {
		t.Errorf("a non-loopback address with an allowed host: check %v, %v; want that name alone", c, err)
	}
	for _, bad := range []string{"http://x", "a b", "x:port", "u@x"} {
		if _, err := Listen("127.0.0.1:0", "--addr", http.NotFoundHandler(), Options{AllowedHosts: []string{bad}}); err == nil {
			t.Errorf("allowed host %q: no error", bad)
		}
	}
}

// The server has read, idle and write timeouts; the write timeout is above
// the handler's own request timeout, and none when that is none.
func TestServerTimeouts(t *testing.T) {
	for _, c := range []struct {
		req, write time.Duration
	}{{0, 10*time.Second + writeMargin}, {3 * time.Second, 3*time.Second + writeMargin}, {-1, 0}} {
		s, err := Listen("127.0.0.1:0", "--addr", http.NotFoundHandler(), Options{RequestTimeout: c.req})
		if err != nil {
			t.Fatal(err)
		}
		s.ln.Close()
		if s.srv.WriteTimeout != c.write || s.srv.ReadTimeout != 30*time.Second || s.srv.IdleTimeout != 2*time.Minute ||
			s.srv.ReadHeaderTimeout != 10*time.Second {
			t.Errorf("RequestTimeout %v: write %v, read %v, idle %v, header %v", c.req, s.srv.WriteTimeout, s.srv.ReadTimeout,
				s.srv.IdleTimeout, s.srv.ReadHeaderTimeout)
		}
	}
}
