package uiserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// ErrAddrInUse is wrapped by Listen's error when another process listens on
// the address.
var ErrAddrInUse = errors.New("address already in use")

// ShutdownTimeout bounds how long Serve waits for the requests in flight
// once its context ends.
const ShutdownTimeout = 5 * time.Second

// Options are the server's options beyond its address and handler.
type Options struct {
	// AllowedHosts are the further names (as in the Host header) the
	// server answers to: "name" accepts name with any port or none,
	// "name:port" that port only. With a loopback address the server
	// always answers to localhost, 127.0.0.1 and [::1] (with its port, or
	// none); with another address and no AllowedHosts it answers to any
	// name. Defaults to none.
	AllowedHosts []string
	// RequestTimeout is the handler's own bound on a request
	// (ui.Config.Timeout): the server's write timeout is set above it, so
	// that the handler's answer (a 503 saying the database timed out) gets
	// out. Defaults to 10s; negative: none, and no write timeout.
	RequestTimeout time.Duration
}

// Server timeouts. ReadHeaderTimeout and ReadTimeout: a client that never
// finishes its request must not hold a connection for good (an action's
// form is small). IdleTimeout: a browser's kept-alive connections between
// live updates are closed after a while. writeMargin is how much longer
// than RequestTimeout the write of an answer may take.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	writeMargin       = 20 * time.Second
)

// Server is the UI's HTTP server, bound to its address.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr (host:port; port 0 picks a free port) for h. flag names
// the command's flag that gave addr, for the error: an address in use gives
// an error wrapping ErrAddrInUse. The server answers 421 Misdirected
// Request to a request naming a host it does not answer to (see
// Options.AllowedHosts).
func Listen(addr, flag string, h http.Handler, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s %s: %w (another leasehold ui?): choose another with %s", flag, addr, ErrAddrInUse, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	hosts, err := newHostCheck(ln.Addr(), o.AllowedHosts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if hosts != nil {
		h = hosts.wrap(h)
	}
	write := time.Duration(0)
	switch {
	case o.RequestTimeout == 0:
		write = 10*time.Second + writeMargin
	case o.RequestTimeout > 0:
		write = o.RequestTimeout + writeMargin
	}
	return &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: write, IdleTimeout: idleTimeout}}, nil
}

// URL is the address the server serves, as a URL: http://host:port/, with
// the port chosen when Listen was given port 0.
func (s *Server) URL() string {
	return "http://" + s.ln.Addr().String() + "/"
}

// Serve serves until ctx ends, then shuts down: it stops accepting, and
// waits up to ShutdownTimeout for the requests in flight. It returns nil
// after a shutdown, and the error that stopped the server otherwise.
func (s *Server) Serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s.srv.Close() // the requests still in flight are cut
		return nil
	}
	return err
}
