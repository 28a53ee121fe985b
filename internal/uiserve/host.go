package uiserve

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// DNS rebinding: a page of http://evil.example:8080 whose name the
// attacker then resolves to 127.0.0.1 is, to the browser, same-origin with
// the UI on 127.0.0.1:8080. It could read the pages (and their CSRF token)
// and post actions that pass both CSRF checks, which compare the request's
// origin with its own Host. Only the Host header tells such a request
// apart: a server on a loopback address answers to the loopback names
// alone, and to the names it is told (--allowed-host).

// hostCheck is the set of names a server answers to.
type hostCheck struct {
	port  string
	names map[string]bool // any port or none
	exact map[string]bool // "name:port"
}

// newHostCheck returns the check of a server bound to addr, nil when it
// answers to any name (a non-loopback address, no allowed hosts).
func newHostCheck(addr net.Addr, allowed []string) (*hostCheck, error) {
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return nil, fmt.Errorf("uiserve: bound address %s: %w", addr, err)
	}
	c := &hostCheck{port: port, names: map[string]bool{}, exact: map[string]bool{}}
	loopback := false
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		loopback = true
		for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
			c.exact[net.JoinHostPort(n, port)] = true
			c.exact[n] = true
		}
	}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" || strings.ContainsAny(a, "/ \t@") {
			return nil, fmt.Errorf("uiserve: allowed host %q: want a name or name:port, such as queue.example.com", a)
		}
		if h, p, err := net.SplitHostPort(a); err == nil {
			if _, err := strconv.ParseUint(p, 10, 16); err != nil {
				return nil, fmt.Errorf("uiserve: allowed host %q: port %q is not a port number", a, p)
			}
			c.exact[net.JoinHostPort(h, p)] = true
			continue
		}
		c.names[strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")] = true
	}
	if !loopback && len(c.names) == 0 && len(c.exact) == 0 {
		return nil, nil
	}
	return c, nil
}

// allows reports whether the server answers to host (a Host header).
func (c *hostCheck) allows(host string) bool {
	host = strings.ToLower(host)
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
	}
	if name == "" {
		return false
	}
	if c.names[name] {
		return true
	}
	if port == "" {
		return c.exact[name]
	}
	return c.exact[net.JoinHostPort(name, port)]
}

// wrap returns h behind the check: a request naming another host gets 421
// Misdirected Request, and never reaches h.
func (c *hostCheck) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.allows(r.Host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusMisdirectedRequest)
			fmt.Fprintf(w, "leasehold ui: this server does not answer to host %q (a DNS rebinding attempt, or a proxy: allow its name with --allowed-host)\n", r.Host)
			return
		}
		h.ServeHTTP(w, r)
	})
}
