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

// Server is the UI's HTTP server, bound to its address.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr (host:port; port 0 picks a free port) for h. flag names
// the command's flag that gave addr, for the error: an address in use gives
// an error wrapping ErrAddrInUse.
func Listen(addr, flag string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s %s: %w (another leasehold ui?): choose another with %s", flag, addr, ErrAddrInUse, flag)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	// ReadHeaderTimeout: a client that never finishes its request must not
	// hold a connection for good. No write timeout: pages are read quickly,
	// and a slow reader only costs its connection.
	return &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
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
