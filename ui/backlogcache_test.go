package ui

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

// fakeBacklogs is a cache over a read that takes cost on a clock the test
// moves, and counts its reads.
type fakeBacklogs struct {
	*backlogs
	mu    sync.Mutex
	clock time.Time
	cost  time.Duration
	reads int
	fail  error
}

func newFakeBacklogs(maxAge time.Duration) *fakeBacklogs {
	f := &fakeBacklogs{clock: time.Unix(1e9, 0)}
	f.backlogs = &backlogs{maxAge: maxAge, log: slog.New(slog.DiscardHandler), m: map[string]*backlogEntry{},
		now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.clock },
		read: func(ctx context.Context, group string, waits bool) (admin.Backlog, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.reads++
			f.clock = f.clock.Add(f.cost)
			if f.fail != nil {
				return admin.Backlog{}, f.fail
			}
			return admin.Backlog{ReadAt: f.clock, HasWaits: waits,
				Stats: make([]queue.PartitionStats, f.reads)}, nil // the count of reads, as its length
		}}
	return f
}

func (f *fakeBacklogs) advance(d time.Duration) { f.mu.Lock(); f.clock = f.clock.Add(d); f.mu.Unlock() }

// settle waits until no read is in flight.
func (f *fakeBacklogs) settle(t *testing.T) {
	t.Helper()
	for range 1000 {
		f.backlogs.mu.Lock()
		busy := false
		for _, e := range f.backlogs.m {
			busy = busy || e.fl != nil
		}
		f.backlogs.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a read stayed in flight")
}

// get returns which read (1, 2, ...) the cache answered with.
func (f *fakeBacklogs) get(t *testing.T, waits bool) int {
	t.Helper()
	b, err := f.backlogs.get(context.Background(), "g", waits)
	if err != nil {
		t.Fatal(err)
	}
	f.settle(t)
	return len(b.Stats)
}

// A count is served until maxAge, then served once more while the next
// one is read; a count that took long waits ten times its duration.
func TestBacklogCacheAges(t *testing.T) {
	f := newFakeBacklogs(5 * time.Second)
	if n := f.get(t, false); n != 1 {
		t.Fatalf("first get: read %d; want 1", n)
	}
	f.advance(4 * time.Second)
	if n := f.get(t, false); n != 1 || f.reads != 1 {
		t.Fatalf("4s later: read %d of %d; want the first, no new read", n, f.reads)
	}
	f.advance(time.Second)
	if n := f.get(t, false); n != 1 || f.reads != 2 {
		t.Fatalf("5s later: read %d of %d; want the first served while the second is read", n, f.reads)
	}
	if n := f.get(t, false); n != 2 {
		t.Fatalf("then: read %d; want the second", n)
	}
	// The waiting keys were not read: a get of them waits for a read.
	if n := f.get(t, true); n != 3 {
		t.Fatalf("with waits: read %d; want a third", n)
	}
	// A read taking 2s: the next waits 20s, not 5s.
	f.cost = 2 * time.Second
	f.advance(5 * time.Second)
	f.get(t, false)
	if f.reads != 4 {
		t.Fatalf("%d reads; want 4", f.reads)
	}
	f.advance(10 * time.Second)
	f.get(t, false)
	if f.reads != 4 {
		t.Errorf("10s after a count of 2s: %d reads; want none more (20s apart)", f.reads)
	}
	f.advance(10 * time.Second)
	f.get(t, false)
	if f.reads != 5 {
		t.Errorf("20s after a count of 2s: %d reads; want 5", f.reads)
	}
}

// A failed count keeps the previous one; a group never counted fails its
// pages with the read's error, without reading again until the next read
// is due; a failed read is spaced as a slow one; a negative maxAge reads
// on every get.
func TestBacklogCacheFailures(t *testing.T) {
	f := newFakeBacklogs(time.Second)
	boom := errors.New("boom")
	f.fail = boom
	if _, err := f.backlogs.get(context.Background(), "g", false); !errors.Is(err, boom) {
		t.Fatalf("get with the read failing: err = %v; want boom", err)
	}
	f.settle(t)
	f.fail = nil
	if _, err := f.backlogs.get(context.Background(), "g", false); !errors.Is(err, boom) || f.reads != 1 {
		t.Fatalf("right after a failed first read: err = %v, %d reads; want boom again, no new read", err, f.reads)
	}
	f.advance(time.Second)
	if n := f.get(t, false); n != 2 {
		t.Fatalf("a second later: read %d; want the second", n)
	}
	// A failed refresh keeps the reading, and is retried after maxAge,
	// not on every get.
	f.fail = boom
	f.advance(time.Second)
	if n := f.get(t, false); n != 2 || f.reads != 3 {
		t.Fatalf("read %d of %d; want the second, served while the third fails", n, f.reads)
	}
	f.fail = nil
	if n := f.get(t, false); n != 2 || f.reads != 3 {
		t.Errorf("right after a failed count: read %d of %d; want the second kept, no new read", n, f.reads)
	}
	f.advance(time.Second)
	f.get(t, false)
	if n := f.get(t, false); n != 4 {
		t.Errorf("a second after a failed count: read %d; want the fourth", n)
	}
	// A read failing after 3s (a timeout, say) waits 30s.
	f.fail, f.cost = boom, 3*time.Second
	f.advance(time.Second)
	f.get(t, false)
	f.fail, f.cost = nil, 0
	f.advance(20 * time.Second)
	f.get(t, false)
	if f.reads != 5 {
		t.Errorf("20s after a read failing in 3s: %d reads; want 5 (the next 30s after it)", f.reads)
	}
	f.advance(10 * time.Second)
	f.get(t, false)
	if f.reads != 6 {
		t.Errorf("30s after a read failing in 3s: %d reads; want 6", f.reads)
	}

	u := newFakeBacklogs(-1)
	u.get(t, false)
	u.get(t, false)
	if u.reads != 2 {
		t.Errorf("maxAge -1: %d reads for 2 gets; want 2", u.reads)
	}
}

// The background reads keep the waiting keys while pages asked for them
// in the last waitsKept, and drop them after: the overview alone does not
// read them.
func TestBacklogCacheWaitsKept(t *testing.T) {
	f := newFakeBacklogs(time.Second)
	f.get(t, true)
	f.advance(time.Second)
	f.get(t, false) // a refresh, with the waiting keys (asked for a second ago)
	if b, _ := f.backlogs.get(context.Background(), "g", false); !b.HasWaits {
		t.Fatal("a refresh a second after a page asked for the waiting keys dropped them")
	}
	f.advance(waitsKept)
	f.get(t, false) // a refresh, without them
	if b, _ := f.backlogs.get(context.Background(), "g", false); b.HasWaits {
		t.Error("a refresh a minute after the last page asked for the waiting keys still read them")
	}
	// A page asking for them again waits for a read with them.
	if b, err := f.backlogs.get(context.Background(), "g", true); err != nil || !b.HasWaits {
		t.Errorf("get with waits = %+v, %v; want the waiting keys", b, err)
	}
}
