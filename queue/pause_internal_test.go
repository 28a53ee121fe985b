package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// pauseFixture returns a Processor (no poll of its own until a watch) and
// a Client on a database with groups h and g, g paused.
func pauseFixture(t *testing.T) (*Processor, context.Context) {
	t.Helper()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('h', 2), ('g', 2)`)
	pgtest.Must(t, err)
	db := pgtest.DBOn(t, pool)
	c, err := New(db, Config{})
	pgtest.Must(t, err)
	pgtest.Must(t, c.Pause(ctx, "g", "", "test"))
	p, err := NewProcessor(db, ProcessorConfig{Workers: NewWorkers(), PauseInterval: time.Hour})
	pgtest.Must(t, err)
	return p, ctx
}

// A refresh that read the watched groups [h] races the first partition of
// g, whose own read publishes g's pause: the refresh of fewer groups must
// not publish after it and drop g's pause. The hooks hold the first
// refresh after it read its groups; g's watch then runs to completion or,
// when the first refresh holds the lock (the fix), until it waits for it.
// Without the fix (groups read before the lock), g's pause is dropped.
func TestPauseRefreshKeepsAGroupWatchedMeanwhile(t *testing.T) {
	t.Parallel()
	p, ctx := pauseFixture(t)
	ps := &p.pauses
	if !ps.watch(ctx, "h") {
		t.Fatal("watch h failed")
	}
	defer ps.unwatch("h")
	held := make(chan bool, 1)
	release := make(chan struct{})
	bLock := make(chan struct{}, 1)
	var bStarted atomic.Bool
	var once sync.Once
	ps.testHook = func(step string, groups []string) {
		switch {
		case step == "read" && len(groups) == 1 && groups[0] == "h":
			once.Do(func() {
				locked := !ps.refreshing.TryLock()
				if !locked {
					ps.refreshing.Unlock()
				}
				held <- locked
				<-release
			})
		case step == "lock" && bStarted.Load():
			select {
			case bLock <- struct{}{}:
			default:
			}
		}
	}
	errA := make(chan error, 1)
	go func() { errA <- ps.refresh(ctx) }()
	locked := <-held
	bStarted.Store(true)
	okB := make(chan bool, 1)
	go func() { okB <- ps.watch(ctx, "g") }()
	defer ps.unwatch("g")
	if locked {
		<-bLock
	} else {
		ok := <-okB
		okB <- ok
	}
	close(release)
	pgtest.Must(t, <-errA)
	if !<-okB {
		t.Fatal("watch g failed")
	}
	if s := ps.of("g"); s == nil || !s.all {
		t.Fatalf("g's pauses after both reads: %+v; want the group paused", s)
	}
}

// A group is marked loaded (a second partition of it may pass await) only
// once its pauses are in state. Without the fix (marked before the store),
// the hook finds g not paused.
func TestPauseLoadedAfterStore(t *testing.T) {
	t.Parallel()
	p, ctx := pauseFixture(t)
	ps := &p.pauses
	var bad atomic.Value
	ps.testHook = func(step string, groups []string) {
		if step != "loaded" {
			return
		}
		if s := ps.of("g"); s == nil || !s.all {
			bad.Store("g marked loaded before its pause was in state")
		}
	}
	if !ps.watch(ctx, "g") {
		t.Fatal("watch g failed")
	}
	defer ps.unwatch("g")
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	// A second partition finds the group loaded, and paused.
	if !ps.watch(ctx, "g") {
		t.Fatal("second watch g failed")
	}
	defer ps.unwatch("g")
	if s := ps.of("g"); s == nil || !s.all {
		t.Fatal("second partition: g not paused")
	}
}

// The poll outlives the partition that started it (its context is the
// Processor's, not that partition's) and ends with the last partition.
func TestPausePollLifetime(t *testing.T) {
	t.Parallel()
	p, ctx := pauseFixture(t)
	ps := &p.pauses
	first, cancel := context.WithCancel(ctx)
	if !ps.watch(first, "h") || !ps.watch(ctx, "g") {
		t.Fatal("watch failed")
	}
	ps.mu.Lock()
	done := ps.polling
	ps.mu.Unlock()
	cancel()
	ps.unwatch("h")
	// Still polling for g: a kick is read.
	before := ps.polls.Load()
	for ps.polls.Load() == before {
		ps.wake()
		select {
		case <-done:
			t.Fatal("the poll ended with the first partition")
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	ps.unwatch("g")
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the poll did not end with the last partition")
	}
}

// The partition reading its group's pauses ends (a handoff) during the
// read: another partition of the group waiting for them reads them itself
// instead of waiting for the poll (an hour here). Without that, the second
// watch waits until the test's context ends.
func TestPauseWatchReadsWhenTheReaderEnds(t *testing.T) {
	t.Parallel()
	p, ctx := pauseFixture(t)
	ps := &p.pauses
	reading := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	ps.testHook = func(step string, groups []string) {
		if step == "read" {
			once.Do(func() {
				close(reading)
				<-release
			})
		}
	}
	first, cancel := context.WithCancel(ctx)
	okA := make(chan bool, 1)
	go func() { okA <- ps.watch(first, "g") }()
	<-reading
	okB := make(chan bool, 1)
	go func() { okB <- ps.watch(ctx, "g") }()
	cancel()
	close(release)
	if <-okA {
		t.Fatal("the cancelled watch reports the pauses read")
	}
	ps.unwatch("g")
	defer ps.unwatch("g")
	select {
	case ok := <-okB:
		if !ok {
			t.Fatal("the second watch failed")
		}
	case <-ctx.Done():
		t.Fatal("the second partition waited for the poll after the reader ended")
	}
	if s := ps.of("g"); s == nil || !s.all {
		t.Fatal("g not paused")
	}
}
