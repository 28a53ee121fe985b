package ui

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
)

// backlogs caches each group's backlog (admin.Backlog: the counts of its
// pending jobs and its waiting keys), whose read costs as much as the
// group's pending jobs are many. A page takes the cached reading while it
// is younger than maxAge; an older one is still served at once, and one
// read in the background replaces it (stale while revalidating), so that
// no page waits on the count but the first of a group, and the database
// counts a group at most once per maxAge however many pages are open. A
// count that took long is repeated less often: at most once per
// backlogSpacing times its duration, so that counting a group never takes
// more than a tenth of the database's time on one connection.
type backlogs struct {
	maxAge  time.Duration // negative: no cache, every page reads
	timeout time.Duration // bounds each read, which no request cancels
	read    func(ctx context.Context, group string, waits bool) (admin.Backlog, error)
	log     *slog.Logger
	now     func() time.Time // the local clock, for ages

	mu sync.Mutex
	m  map[string]*backlogEntry
}

// backlogEntry is a group's cached reading and its read in flight.
type backlogEntry struct {
	b       admin.Backlog
	have    bool          // b holds a reading
	started time.Time     // when b's read started (local clock)
	took    time.Duration // how long b's read took
	failed  time.Time     // when the latest failed read started
	fl      *flight       // the read in flight, if any
}

// flight is one read of a group's backlog, which requests share.
type flight struct {
	waits   bool
	started time.Time
	done    chan struct{} // closed when b and err are set
	b       admin.Backlog
	err     error
}

// backlogSpacing is how many times its duration a count waits at least
// before the next one of its group.
const backlogSpacing = 10

// maxBacklogs bounds the groups cached: past it, the cache starts over.
const maxBacklogs = 10000

// get returns group's backlog, with its waiting keys if waits. It waits
// only when no usable reading is cached: then for a read, shared with
// the requests that wait for the same.
func (c *backlogs) get(ctx context.Context, group string, waits bool) (admin.Backlog, error) {
	if c.maxAge < 0 {
		return c.read(ctx, group, waits)
	}
	for {
		c.mu.Lock()
		e := c.m[group]
		if e == nil {
			if len(c.m) >= maxBacklogs {
				clear(c.m)
			}
			e = &backlogEntry{}
			c.m[group] = e
		}
		if e.have && (e.b.HasWaits || !waits) {
			last := e.started
			if e.failed.After(last) {
				last = e.failed // a failed read is retried after maxAge too
			}
			if age := c.now().Sub(last); age >= c.maxAge && age >= backlogSpacing*e.took && e.fl == nil {
				c.start(group, e, e.b.HasWaits)
			}
			b := e.b
			c.mu.Unlock()
			return b, nil
		}
		fl := e.fl
		if fl == nil || (waits && !fl.waits) {
			fl = c.start(group, e, waits || e.b.HasWaits)
		}
		c.mu.Unlock()
		select {
		case <-fl.done:
		case <-ctx.Done():
			return admin.Backlog{}, ctx.Err()
		}
		if fl.err != nil {
			return admin.Backlog{}, fl.err
		}
		if fl.b.HasWaits || !waits {
			return fl.b, nil
		}
	}
}

// start starts a read of group's backlog for e; c.mu is held. The read
// runs on its own context, bounded by c.timeout: a request that gives up
// (its client went away, its own timeout) does not fail the read that
// other requests wait for.
func (c *backlogs) start(group string, e *backlogEntry, waits bool) *flight {
	fl := &flight{waits: waits, started: c.now(), done: make(chan struct{})}
	e.fl = fl
	go func() {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if c.timeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, c.timeout)
		}
		defer cancel()
		fl.b, fl.err = c.read(ctx, group, waits)
		took := c.now().Sub(fl.started)
		c.mu.Lock()
		if e.fl == fl {
			e.fl = nil
		}
		switch {
		case fl.err != nil:
			e.failed = fl.started
		case !e.have || !fl.started.Before(e.started):
			e.b, e.have, e.started, e.took = fl.b, true, fl.started, took
		}
		c.mu.Unlock()
		if fl.err != nil {
			c.log.Warn("ui: reading the backlog failed", "group", group, "error", fl.err)
		}
		close(fl.done)
	}()
	return fl
}
