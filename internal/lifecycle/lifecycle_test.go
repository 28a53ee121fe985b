package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// svc is what the contract checks run against: the real Service, or a
// deliberately wrong one (the negative controls).
type svc interface {
	Start(ctx context.Context, r Refusals, start, cleanup func(ctx context.Context) error) error
	Stop(ctx context.Context, stop, never func(ctx context.Context) error) error
}

// counted is a lifecycle function that counts its runs and returns a new
// error value on each (so that returning a recorded result can be told
// from running the function again), or nil when ok.
type counted struct {
	name  string
	ok    bool
	delay time.Duration // how long each run takes
	runs  atomic.Int32
}

func (c *counted) fn(ctx context.Context) error {
	n := c.runs.Add(1)
	time.Sleep(c.delay)
	if c.ok {
		return nil
	}
	return fmt.Errorf("%s failed (run %d)", c.name, n)
}

var (
	errMineStarted = Started("thing: already started")
	errMineStopped = Stopped("thing: stopped")
	refusals       = Refusals{Started: errMineStarted, Stopped: errMineStopped}
)

// contract checks every documented answer of Start and Stop on services
// made by newSvc, and returns what it found wrong.
func contract(newSvc func() svc) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	ctx := context.Background()

	{ // second Start
		s := newSvc()
		start, stop := &counted{name: "start", ok: true}, &counted{name: "stop", ok: true}
		if err := s.Start(ctx, refusals, start.fn, nil); err != nil {
			fail("first Start: %v", err)
		}
		if err := s.Start(ctx, refusals, start.fn, nil); err != errMineStarted || !errors.Is(err, ErrStarted) {
			fail("second Start = %v; want the component's ErrStarted", err)
		}
		if n := start.runs.Load(); n != 1 {
			fail("start ran %d times over two Starts; want 1", n)
		}
		if err := s.Stop(ctx, stop.fn, nil); err != nil {
			fail("Stop: %v", err)
		}
		if err := s.Start(ctx, refusals, start.fn, nil); err != errMineStopped || !errors.Is(err, ErrStopped) {
			fail("Start after Stop = %v; want the component's ErrStopped", err)
		}
		if n := start.runs.Load(); n != 1 {
			fail("start ran %d times after Stop; want 1", n)
		}
	}

	{ // second Stop returns the first one's result: an error, then nil
		for _, ok := range []bool{false, true} {
			s := newSvc()
			stop, never := &counted{name: "stop", ok: ok}, &counted{name: "never", ok: true}
			if err := s.Start(ctx, refusals, nil, nil); err != nil {
				fail("Start: %v", err)
			}
			first := s.Stop(ctx, stop.fn, never.fn)
			if (first == nil) != ok {
				fail("first Stop = %v; want stop's result (ok=%v)", first, ok)
			}
			for i := range 3 {
				if err := s.Stop(ctx, stop.fn, never.fn); err != first {
					fail("Stop #%d = %v; want the first one's result %v", i+2, err, first)
				}
			}
			if n, m := stop.runs.Load(), never.runs.Load(); n != 1 || m != 0 {
				fail("over four Stops, stop ran %d times and never %d; want 1 and 0", n, m)
			}
		}
	}

	{ // Stop on a service never started runs never only, then refuses Start
		s := newSvc()
		start, stop, never := &counted{name: "start", ok: true}, &counted{name: "stop", ok: true}, &counted{name: "never"}
		first := s.Stop(ctx, stop.fn, never.fn)
		if first == nil {
			fail("Stop of a new service = nil; want never's error")
		}
		if err := s.Stop(ctx, stop.fn, never.fn); err != first {
			fail("second Stop of a never-started service = %v; want %v", err, first)
		}
		if n, m := stop.runs.Load(), never.runs.Load(); n != 0 || m != 1 {
			fail("stop ran %d times and never %d; want 0 and 1", n, m)
		}
		if err := s.Start(ctx, refusals, start.fn, nil); err != errMineStopped {
			fail("Start after a Stop of a new service = %v; want ErrStopped", err)
		}
		if n := start.runs.Load(); n != 0 {
			fail("start ran %d times on a stopped service", n)
		}
	}

	{ // failed Start: cleanup runs, the service is stopped, Stop returns cleanup's result
		s := newSvc()
		start, cleanup := &counted{name: "start"}, &counted{name: "cleanup"}
		stop, never := &counted{name: "stop", ok: true}, &counted{name: "never", ok: true}
		err := s.Start(ctx, refusals, start.fn, cleanup.fn)
		if err == nil || err.Error() != "start failed (run 1)" {
			fail("failed Start = %v; want start's error", err)
		}
		if n := cleanup.runs.Load(); n != 1 {
			fail("cleanup ran %d times after a failed start; want 1", n)
		}
		first := s.Stop(ctx, stop.fn, never.fn)
		if first == nil || first.Error() != "cleanup failed (run 1)" {
			fail("Stop after a failed Start = %v; want cleanup's error", first)
		}
		if err := s.Stop(ctx, stop.fn, never.fn); err != first {
			fail("second Stop after a failed Start = %v; want %v", err, first)
		}
		if n, m := stop.runs.Load(), never.runs.Load(); n != 0 || m != 0 {
			fail("after a failed Start, Stop ran stop %d times and never %d; want neither", n, m)
		}
		if err := s.Start(ctx, refusals, start.fn, cleanup.fn); err != errMineStopped {
			fail("Start after a failed Start = %v; want ErrStopped", err)
		}
		if n, m := start.runs.Load(), cleanup.runs.Load(); n != 1 || m != 1 {
			fail("start ran %d times and cleanup %d; want 1 and 1", n, m)
		}
	}

	{ // concurrent Stops all return the one result
		s := newSvc()
		stop := &counted{name: "stop", delay: 20 * time.Millisecond}
		if err := s.Start(ctx, refusals, nil, nil); err != nil {
			fail("Start: %v", err)
		}
		const n = 16
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { errs[i] = s.Stop(ctx, stop.fn, nil) })
		}
		wg.Wait()
		if r := stop.runs.Load(); r != 1 {
			fail("%d concurrent Stops ran stop %d times; want 1", n, r)
		}
		for i, err := range errs {
			if err == nil || err != errs[0] {
				fail("concurrent Stop %d = %v; want the one result %v", i, err, errs[0])
				break
			}
		}
	}
	return bad
}

func TestServiceKeepsTheContract(t *testing.T) {
	for _, b := range contract(func() svc { return new(Service) }) {
		t.Error(b)
	}
}

// The contract checks must catch the hand-written state machines this
// package replaced, and other plausible mistakes.
func TestContractNegativeControls(t *testing.T) {
	for name, newSvc := range map[string]func() svc{
		"second Stop returns nil (kafka.Consumer before)": func() svc { return &wrong{secondStopNil: true} },
		"every Stop runs stop again":                      func() svc { return &wrong{rerunStop: true} },
		"Start after Stop runs again":                     func() svc { return &wrong{restart: true} },
		"a failed Start leaves the service new":           func() svc { return &wrong{failNew: true} },
		"one refusal for started and stopped":             func() svc { return &wrong{oneRefusal: true} },
		"Stop unlocks while stop runs":                    func() svc { return &wrong{unlocked: true} },
	} {
		if bad := contract(newSvc); len(bad) == 0 {
			t.Errorf("%s: the contract checks found nothing wrong", name)
		}
	}
}

// wrong is a Service with one deliberate mistake.
type wrong struct {
	secondStopNil, rerunStop, restart, failNew, oneRefusal, unlocked bool

	mu      sync.Mutex
	state   state
	stopErr error
}

func (w *wrong) Start(ctx context.Context, r Refusals, start, cleanup func(ctx context.Context) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.state == running || w.oneRefusal && w.state == stopped:
		return r.started()
	case w.state == stopped && !w.restart:
		return r.stopped()
	}
	if start != nil {
		if err := start(ctx); err != nil {
			if !w.failNew {
				w.state = stopped
			}
			if cleanup != nil {
				w.stopErr = cleanup(ctx)
			}
			return err
		}
	}
	w.state = running
	return nil
}

func (w *wrong) Stop(ctx context.Context, stop, never func(ctx context.Context) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unlocked && w.state == running {
		// Check, then act without the lock: concurrent Stops all see
		// the service running.
		w.mu.Unlock()
		err := stop(ctx)
		w.mu.Lock()
		w.state, w.stopErr = stopped, err
		return err
	}
	switch {
	case w.state == idle:
		w.state = stopped
		if never != nil {
			w.stopErr = never(ctx)
		}
	case w.state == running || w.rerunStop:
		w.state = stopped
		if stop != nil {
			w.stopErr = stop(ctx)
		}
	case w.secondStopNil:
		return nil
	}
	return w.stopErr
}

// A Stop during a slow Start waits for it, then stops what it started; a
// Start during a Stop waits for it, then is refused.
func TestStartAndStopSerialise(t *testing.T) {
	var s Service
	ctx := context.Background()
	release := make(chan struct{})
	inStart := make(chan struct{})
	var started, stopRan atomic.Bool
	go s.Start(ctx, refusals, func(context.Context) error {
		close(inStart)
		<-release
		started.Store(true)
		return nil
	}, nil)
	<-inStart
	stopped := make(chan error, 1)
	go func() {
		stopped <- s.Stop(ctx, func(context.Context) error {
			if !started.Load() {
				return errors.New("stop ran before start returned")
			}
			stopRan.Store(true)
			return nil
		}, func(context.Context) error { return errors.New("never ran: the Stop did not see the Start") })
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned %v while Start was still running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil || !stopRan.Load() {
			t.Fatalf("Stop after a slow Start = %v (stop ran: %v); want stop run, nil", err, stopRan.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return after Start did")
	}

	// A Start during a Stop.
	var s2 Service
	pgStart := s2.Start(ctx, refusals, nil, nil)
	if pgStart != nil {
		t.Fatal(pgStart)
	}
	inStop := make(chan struct{})
	releaseStop := make(chan struct{})
	go s2.Stop(ctx, func(context.Context) error { close(inStop); <-releaseStop; return nil }, nil)
	<-inStop
	startErr := make(chan error, 1)
	go func() { startErr <- s2.Start(ctx, refusals, func(context.Context) error { return nil }, nil) }()
	select {
	case err := <-startErr:
		t.Fatalf("Start returned %v during a Stop", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(releaseStop)
	if err := <-startErr; err != errMineStopped {
		t.Fatalf("Start during a Stop = %v; want ErrStopped once the Stop finished", err)
	}
}

// start, cleanup, stop and never get the ctx of the call that runs them.
func TestFunctionsGetTheCallersContext(t *testing.T) {
	type key struct{}
	var got []any
	seen := func(ctx context.Context) error { got = append(got, ctx.Value(key{})); return nil }
	failing := func(ctx context.Context) error { seen(ctx); return errors.New("no") }

	var a, b, c Service
	a.Start(context.WithValue(context.Background(), key{}, "start"), refusals, seen, nil)
	a.Stop(context.WithValue(context.Background(), key{}, "stop"), seen, nil)
	b.Start(context.WithValue(context.Background(), key{}, "failed"), refusals, failing, seen)
	c.Stop(context.WithValue(context.Background(), key{}, "never"), nil, seen)
	want := []any{"start", "stop", "failed", "failed", "never"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("contexts seen %v; want %v", got, want)
	}
}

func TestZeroRefusalsAreTheSharedSentinels(t *testing.T) {
	var s Service
	ctx := context.Background()
	if err := s.Start(ctx, Refusals{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, Refusals{}, nil, nil); err != ErrStarted {
		t.Errorf("second Start = %v; want ErrStarted", err)
	}
	if err := s.Stop(ctx, nil, nil); err != nil {
		t.Errorf("Stop with a nil stop = %v; want nil", err)
	}
	if err := s.Start(ctx, Refusals{}, nil, nil); err != ErrStopped {
		t.Errorf("Start after Stop = %v; want ErrStopped", err)
	}
}

func TestSentinels(t *testing.T) {
	started, stopped := Started("x: already started"), Stopped("x: stopped")
	if started.Error() != "x: already started" || stopped.Error() != "x: stopped" {
		t.Errorf("messages %q, %q", started, stopped)
	}
	if !errors.Is(started, ErrStarted) || errors.Is(started, ErrStopped) {
		t.Error("Started's sentinel must match ErrStarted only")
	}
	if !errors.Is(stopped, ErrStopped) || errors.Is(stopped, ErrStarted) {
		t.Error("Stopped's sentinel must match ErrStopped only")
	}
	if wrapped := fmt.Errorf("ctx: %w", stopped); !errors.Is(wrapped, stopped) || !errors.Is(wrapped, ErrStopped) {
		t.Error("a wrapped component sentinel must match both")
	}
	if Started("x") == Started("x") {
		t.Error("each component's sentinel must be its own value")
	}
}
