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
// read that took long, or failed, is repeated less often: at most once
// per backlogSpacing times its duration, so that counting a group never
// takes more than a tenth of one connection's time. The waiting keys are
// read only while pages asked for them in the last waitsKept.
type backlogs struct {
	maxAge  time.Duration // negative: no cache, every page reads
	timeout time.Duration // bounds each read, which no request cancels; negative: backlogTimeout
	read    func(ctx context.Context, group string, waits bool) (admin.Backlog, error)
	log     *slog.Logger
	now     func() time.Time // the local clock, for ages

	mu sync.Mutex
	m  map[string]*backlogEntry
}

// backlogEntry is a group's cached reading and its read in flight.
type backlogEntry struct {
	b      admin.Backlog
	have   bool          // b holds a reading
	built  time.Time     // when b's read started (local clock)
	last   time.Time     // when the latest read that ended started, failed or not
	took   time.Duration // how long that read took
	err    error         // that read's error, if it failed
	waited time.Time     // when a page last asked for the waiting keys
	fl     *flight       // the read in flight, if any
}

// flight is one read of a group's backlog, which requests share.
type flight struct {
	waits   bool
	started time.Time
	done    chan struct{} // closed when b and err are set
	b       admin.Backlog
	err     error
}

const (
	// backlogSpacing is how many times its duration a read waits at
	// least before the next one of its group.
	backlogSpacing = 10
	// waitsKept is how long after a page last asked for a group's waiting
	// keys the background reads keep reading them.
	waitsKept = time.Minute
	// backlogTimeout bounds a read when Config.Timeout is negative (none
	// for requests): a read that never ends would stop the group's counts.
	backlogTimeout = time.Minute
	// maxBacklogs bounds the groups cached: past it, the cache starts over.
	maxBacklogs = 10000
)

// due reports whether e's next read may start at now.
func (c *backlogs) due(e *backlogEntry, now time.Time) bool {
	age := now.Sub(e.last)
	return e.last.IsZero() || age >= c.maxAge && age >= backlogSpacing*e.took
}

// get returns group's backlog, with its waiting keys if waits. It waits
// only when no usable reading is cached: then for a read, shared with
// the requests that wait for the same. A group whose latest read failed
// and has no reading gets that error until its next read is due.
func (c *backlogs) get(ctx context.Context, group string, waits bool) (admin.Backlog, error) {
	if c.maxAge < 0 {
		return c.read(ctx, group, waits)
	}
	for {
		c.mu.Lock()
		now := c.now()
		e := c.m[group]
		if e == nil {
			if len(c.m) >= maxBacklogs {
				clear(c.m)
			}
			e = &backlogEntry{}
			c.m[group] = e
		}
		if waits {
			e.waited = now
		}
		if e.have && (e.b.HasWaits || !waits) {
			if e.fl == nil && c.due(e, now) {
				c.start(group, e, now.Sub(e.waited) < waitsKept)
			}
			b := e.b
			c.mu.Unlock()
			return b, nil
		}
		fl := e.fl
		if fl == nil {
			if !e.have && e.err != nil && !c.due(e, now) {
				err := e.err
				c.mu.Unlock()
				return admin.Backlog{}, err
			}
			fl = c.start(group, e, waits || now.Sub(e.waited) < waitsKept)
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
		// A read without the waiting keys was in flight: read them now.
	}
}

// start starts a read of group's backlog for e; c.mu is held. The read
// runs on its own context, bounded by c.timeout: a request that gives up
// (its client went away, its own timeout) does not fail the read that
// other requests wait for.
func (c *backlogs) start(group string, e *backlogEntry, waits bool) *flight {
	fl := &flight{waits: waits, started: c.now(), done: make(chan struct{})}
	e.fl = fl
	timeout := c.timeout
	if timeout <= 0 {
		timeout = backlogTimeout
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		fl.b, fl.err = c.read(ctx, group, waits)
		took := c.now().Sub(fl.started)
		c.mu.Lock()
		if e.fl == fl {
			e.fl = nil
		}
		if !fl.started.Before(e.last) {
			e.last, e.took, e.err = fl.started, took, fl.err
		}
		if fl.err == nil && (!e.have || !fl.started.Before(e.built)) {
			e.b, e.have, e.built = fl.b, true, fl.started
		}
		c.mu.Unlock()
		if fl.err != nil {
			c.log.Warn("ui: reading the backlog failed", "group", group, "error", fl.err, "took", took)
		}
		close(fl.done)
	}()
	return fl
}
