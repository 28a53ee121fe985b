package lifecycle

import (
	"context"
	"errors"
	"sync"
)

var (
	// ErrStarted is wrapped by the error of a Start on a service that is
	// already started.
	ErrStarted = errors.New("leasehold: already started")
	// ErrStopped is wrapped by the error of a Start on a service that was
	// stopped (or whose Start failed): a stopped service cannot be
	// restarted.
	ErrStopped = errors.New("leasehold: stopped")
)

// Started returns a component's own sentinel for a second Start: an error
// whose message is msg and which wraps ErrStarted.
func Started(msg string) error { return &sentinel{msg: msg, base: ErrStarted} }

// Stopped returns a component's own sentinel for a Start after Stop: an
// error whose message is msg and which wraps ErrStopped.
func Stopped(msg string) error { return &sentinel{msg: msg, base: ErrStopped} }

// sentinel is a component's error that errors.Is matches to a shared one.
type sentinel struct {
	msg  string
	base error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }

// Refusals are the errors a component's Start returns when it refuses to
// run: normally the component's sentinels, made with Started and Stopped.
// A nil field stands for ErrStarted or ErrStopped itself.
type Refusals struct {
	// Started is returned by a Start on a started service.
	Started error
	// Stopped is returned by a Start on a stopped service.
	Stopped error
}

func (r Refusals) started() error {
	if r.Started == nil {
		return ErrStarted
	}
	return r.Started
}

func (r Refusals) stopped() error {
	if r.Stopped == nil {
		return ErrStopped
	}
	return r.Stopped
}

// state is where a Service is in its life.
type state int

const (
	idle    state = iota // new: never started
	running              // started
	stopped              // stopped, or its Start failed
)

// Service is the state of one started-and-stopped service. Keep it as a
// field of the service and call its Start and Stop from the service's.
// The zero value is a new service. A Service must not be copied after
// first use.
//
// Start and Stop hold one lock while they run, so they serialise: a Stop
// during a slow Start waits for it to return, then stops what it started;
// a Start during a Stop waits, then is refused. The functions they run
// must therefore not call Start or Stop of the same Service.
type Service struct {
	mu      sync.Mutex
	state   state
	stopErr error // the first Stop's result, or the failed Start's cleanup's
}

// Start runs start(ctx) once, on a new service, and returns its error.
//
// On a service already started it runs nothing and returns r.Started; on a
// stopped one (stopped, or whose Start failed), r.Stopped. These refusals
// are returned as they are, never wrapped.
//
// If start fails, Start runs cleanup(ctx) (when not nil) to release what
// start had set up, and leaves the service stopped: it returns start's
// error, and every later Stop returns cleanup's result without running
// anything. ctx is Start's own: a cleanup whose ctx has ended may report
// that it could not finish in time.
func (s *Service) Start(ctx context.Context, r Refusals, start, cleanup func(ctx context.Context) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case running:
		return r.started()
	case stopped:
		return r.stopped()
	}
	var err error
	if start != nil {
		err = start(ctx)
	}
	if err != nil {
		s.state = stopped
		if cleanup != nil {
			s.stopErr = cleanup(ctx)
		}
		return err
	}
	s.state = running
	return nil
}

// Stop stops the service once and returns the result.
//
// The first Stop runs stop(ctx) on a started service, or never(ctx) on one
// that was never started (to release its resources only), and records its
// result (a nil function counts as success). Every later Stop, and every
// Stop after a failed Start, runs nothing and returns the recorded result:
// a second Stop returns the first one's result. Concurrent Stops all
// return that same result.
func (s *Service) Stop(ctx context.Context, stop, never func(ctx context.Context) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case idle:
		s.state = stopped
		if never != nil {
			s.stopErr = never(ctx)
		}
	case running:
		s.state = stopped
		if stop != nil {
			s.stopErr = stop(ctx)
		}
	}
	return s.stopErr
}
