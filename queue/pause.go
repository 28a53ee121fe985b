package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
)

// ErrInvalidPause is returned by Client.Pause and Client.Resume for an
// empty group or a kind longer than 100 bytes.
var ErrInvalidPause = errors.New("queue: invalid pause")

// Pause is a paused group, or a paused kind of a group, as Client.Paused
// lists it.
type Pause struct {
	Group string
	// Kind is the paused kind; "" when the whole group is paused.
	Kind string
	// At is when it was paused (the database's clock).
	At time.Time
	// By names the process that paused it (host and process id).
	By string
	// Reason is the reason given to Pause, if any.
	Reason string
}

// Pause pauses group (kind "") or one kind of it: its owners stop starting
// its jobs (the group's, or the kind's) within about a second: at once
// when they listen for notifications (Processor.Listen), else at their next
// poll (ProcessorConfig.PauseInterval). Jobs running meanwhile finish, and
// their outcomes are recorded. The pause is stored in the database: it
// outlives every worker, and a worker that starts while the group is
// paused starts none of its paused jobs, until Resume. Pausing what is
// paused already changes nothing (the first reason is kept). An unknown
// group gives an error wrapping ErrUnknownGroup.
func (c *Client) Pause(ctx context.Context, group, kind, reason string) error {
	if err := checkPause(group, kind); err != nil {
		return err
	}
	var exists bool
	var n int
	err := c.pool.QueryRow(ctx, c.pz.Pause, group, kind, pausedBy(), reason, c.q.Channel).Scan(&exists, &n)
	if err != nil {
		return store.Classify("queue", "pause", group, err)
	}
	if !exists {
		return fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	if n > 0 {
		c.log.Info("queue: paused", "group", group, "kind", kind, "reason", reason)
	}
	return nil
}

// Resume ends a pause made by Pause(group, kind): kind "" resumes the
// group, but leaves the kinds paused on their own paused. The group's
// owners start its jobs again at once when they listen for notifications,
// else at their next poll. Resuming what is not paused changes nothing. An
// unknown group gives an error wrapping ErrUnknownGroup.
func (c *Client) Resume(ctx context.Context, group, kind string) error {
	if err := checkPause(group, kind); err != nil {
		return err
	}
	var exists bool
	var n int
	if err := c.pool.QueryRow(ctx, c.pz.Resume, group, kind, c.q.Channel).Scan(&exists, &n); err != nil {
		return store.Classify("queue", "resume", group, err)
	}
	if !exists {
		return fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	if n > 0 {
		c.log.Info("queue: resumed", "group", group, "kind", kind)
	}
	return nil
}

// Paused lists the pauses of group ("": of every group), by group and
// kind. An unknown group has none.
func (c *Client) Paused(ctx context.Context, group string) ([]Pause, error) {
	var g *string
	if group != "" {
		g = &group
	}
	rows, err := c.pool.Query(ctx, c.pz.List, g)
	if err != nil {
		return nil, store.ClassifyRead("queue", "list pauses", group, err)
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pause, error) {
		var p Pause
		err := r.Scan(&p.Group, &p.Kind, &p.At, &p.By, &p.Reason)
		return p, err
	})
	if err != nil {
		return nil, store.ClassifyRead("queue", "list pauses", group, err)
	}
	return ps, nil
}

func checkPause(group, kind string) error {
	switch {
	case group == "":
		return fmt.Errorf("%w: group required", ErrInvalidPause)
	case len(kind) > 100:
		return fmt.Errorf("%w: kind is %d bytes; at most 100", ErrInvalidPause, len(kind))
	}
	return nil
}

func pausedBy() string {
	h, _ := os.Hostname()
	return h + ":" + strconv.Itoa(os.Getpid())
}

// paused is what an owner knows of one group's pauses.
type paused struct {
	all   bool     // the whole group
	kinds []string // the kinds paused on their own, sorted
}

// kind reports whether jobs of kind may not start.
func (ps *paused) kind(k string) bool {
	return ps != nil && (ps.all || slices.Contains(ps.kinds, k))
}

// pauses is a Processor's view of the pauses of the groups it runs
// partitions of: read before a group's first partition starts, then
// polled by one goroutine per Processor every PauseInterval, and at once
// when Listen hears a pause or resume. The pipelines read it without a
// lock (an atomic pointer: nothing per job beyond a load when no group is
// paused). The poll runs while the Processor runs a partition: it starts
// with the first Serve and ends with the last, on a context of its own.
type pauses struct {
	p     *Processor
	state atomic.Pointer[map[string]*paused] // groups with a pause
	gen   atomic.Uint64                      // bumped at every change of state
	skips atomic.Int64                       // fetches left out because a group was paused (for tests)
	polls atomic.Int64                       // polls done (for tests)
	read  atomic.Int64                       // when the pauses were last read (UnixNano)

	// refreshing serializes the reads: a read takes the watched groups
	// under it, so that a read of fewer groups never publishes after one
	// of more (it would drop the pauses of the groups it did not read).
	refreshing sync.Mutex

	mu      sync.Mutex
	watched map[string]int           // group -> partitions running
	loads   map[string]chan struct{} // watched group -> closed once its pauses are in state
	stop    context.CancelFunc
	kick    chan struct{}
	polling chan struct{} // closed when the running poll returns (for tests)

	// testHook, when set (by tests), is called at the named steps of a
	// refresh ("lock": before taking refreshing; "read": after taking the
	// watched groups; "loaded": after marking them loaded).
	testHook func(step string, groups []string)
}

// of returns the pauses of group, nil if none.
func (ps *pauses) of(group string) *paused {
	m := ps.state.Load()
	if m == nil || len(*m) == 0 {
		return nil
	}
	return (*m)[group]
}

// watch registers a partition of group and, if the group's pauses were not
// read yet, reads them (retrying until it can, or ctx ends: a partition
// must not fetch before it knows whether its group is paused). It starts
// the poll if it is not running. It reports whether it got them.
func (ps *pauses) watch(ctx context.Context, group string) bool {
	ps.mu.Lock()
	if ps.watched == nil {
		ps.watched, ps.loads = make(map[string]int), make(map[string]chan struct{})
	}
	ps.watched[group]++
	loaded := ps.loads[group]
	if loaded == nil {
		loaded = make(chan struct{})
		ps.loads[group] = loaded
	}
	if ps.stop == nil {
		// The poll's context is its own, not the caller's: it outlives
		// this partition's run when others still run.
		pctx, cancel := context.WithCancel(context.Background())
		ps.stop, ps.kick, ps.polling = cancel, make(chan struct{}, 1), make(chan struct{})
		go func(kick, done chan struct{}) {
			defer close(done)
			ps.poll(pctx, kick)
		}(ps.kick, ps.polling)
	}
	ps.mu.Unlock()
	// Every partition waiting for the group's pauses may read them: the
	// first to take the lock reads, the others find them loaded. (Left to
	// the first partition alone, a handoff ending its run during the read
	// would leave the others waiting for the poll, up to PauseInterval.)
	select {
	case <-loaded:
		return true
	default:
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-loaded: // read by another partition, or a poll
			return true
		case <-t.C:
		}
		err := ps.load(ctx, loaded)
		if err == nil {
			return true
		}
		if ctx.Err() == nil {
			ps.p.fails.Fail("pauses", "queue: cannot read the group's pauses; its partitions wait", "group", group, "err", err)
		}
		t.Reset(ps.p.cfg.PollInterval)
	}
}

// await waits while the whole group is paused, before a partition's run
// opens: so that a run taking over from one that ended abruptly does not
// run the jobs it recovers (see recover.go) in a paused group. It reports
// whether the group is not paused; false when ctx or hctx ended.
func (ps *pauses) await(ctx, hctx context.Context, group string, wake <-chan struct{}) bool {
	for {
		if s := ps.of(group); s == nil || !s.all {
			return true
		}
		ps.skips.Add(1)
		select {
		case <-ctx.Done():
			return false
		case <-hctx.Done():
			return false
		case <-wake: // a change of the pauses wakes every partition
		}
	}
}

// unwatch unregisters a partition of group; the poll stops with the last.
func (ps *pauses) unwatch(group string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.watched[group]--; ps.watched[group] <= 0 {
		delete(ps.watched, group)
		delete(ps.loads, group)
	}
	if len(ps.watched) == 0 && ps.stop != nil {
		ps.stop()
		ps.stop, ps.kick = nil, nil
	}
}

// wake asks the poll to read the pauses now (Listen heard a change).
func (ps *pauses) wake() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.kick != nil {
		select {
		case ps.kick <- struct{}{}:
		default:
		}
	}
}

// poll reads the pauses when kicked, and when PauseInterval passed since
// the last read (the member's poll reads them every PollInterval), until
// ctx ends.
func (ps *pauses) poll(ctx context.Context, kick <-chan struct{}) {
	t := time.NewTimer(ps.p.cfg.PauseInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-t.C:
			// The member's poll reads the pauses too (see poll.go): read
			// them here only when no read came within PauseInterval.
			if since := time.Since(time.Unix(0, ps.read.Load())); since < ps.p.cfg.PauseInterval {
				t.Reset(ps.p.cfg.PauseInterval - since)
				continue
			}
		}
		if err := ps.refresh(ctx); err != nil && ctx.Err() == nil {
			ps.p.fails.Fail("pauses", "queue: cannot read pauses; the last ones read stay in force", "err", err)
		} else if err == nil {
			ps.p.fails.Recovered("pauses", "queue: reading pauses recovered")
		}
		t.Reset(ps.p.cfg.PauseInterval)
	}
}

// refresh reads the pauses of the watched groups (one statement), and
// if they changed, publishes them and wakes the partitions. The groups
// read are marked loaded only once their pauses are published.
func (ps *pauses) refresh(ctx context.Context) error {
	return ps.load(ctx, nil)
}

// load is refresh, unless loaded (if not nil) is closed once the lock is
// taken: another read loaded the pauses meanwhile.
func (ps *pauses) load(ctx context.Context, loaded <-chan struct{}) error {
	return ps.loadWith(ctx, loaded, func(groups []string) (pgx.Rows, func() error, error) {
		rows, err := ps.p.pool.Query(ctx, ps.p.pz.Kinds, groups)
		return rows, func() error { return nil }, err
	})
}

// pauseReader runs the read of the pauses of groups (store's pauseKinds)
// and returns its rows, and done, which ends the round trip it belongs to
// once the rows are read (the member's poll sends the read together with
// its own statements).
type pauseReader func(groups []string) (rows pgx.Rows, done func() error, err error)

// loadWith is load, reading the pauses with read.
func (ps *pauses) loadWith(ctx context.Context, loaded <-chan struct{}, read pauseReader) error {
	ps.hook("lock", nil)
	ps.refreshing.Lock()
	defer ps.refreshing.Unlock()
	if loaded != nil {
		select {
		case <-loaded:
			return nil
		default:
		}
	}
	ps.mu.Lock()
	groups := make([]string, 0, len(ps.watched))
	for g := range ps.watched {
		groups = append(groups, g)
	}
	ps.mu.Unlock()
	ps.hook("read", groups)
	rows, done, err := read(groups)
	if err != nil {
		return err
	}
	next := make(map[string]*paused)
	var g, k string
	_, err = pgx.ForEachRow(rows, []any{&g, &k}, func() error {
		s := next[g]
		if s == nil {
			s = &paused{}
			next[g] = s
		}
		if k == "" {
			s.all = true
		} else {
			s.kinds = append(s.kinds, k)
		}
		return nil
	})
	if err := errors.Join(err, done()); err != nil {
		return err
	}
	ps.polls.Add(1)
	ps.read.Store(time.Now().UnixNano())
	for _, s := range next {
		slices.Sort(s.kinds)
	}
	prev := ps.state.Load()
	changed := !(prev != nil && samePauses(*prev, next) || prev == nil && len(next) == 0)
	if changed {
		ps.state.Store(&next)
		ps.gen.Add(1)
	}
	// Loaded after the store: a partition waiting for its group's pauses
	// must find them in state.
	ps.mu.Lock()
	for _, g := range groups {
		if c, ok := ps.loads[g]; ok {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	}
	ps.mu.Unlock()
	ps.hook("loaded", groups)
	if !changed {
		return nil
	}
	for _, g := range groups {
		var was map[string]*paused
		if prev != nil {
			was = *prev
		}
		if a, b := was[g], next[g]; !samePaused(a, b) {
			if b == nil {
				ps.p.log.Info("queue: group resumed", "group", g)
			} else {
				ps.p.log.Info("queue: group paused", "group", g, "whole", b.all, "kinds", b.kinds)
			}
		}
	}
	ps.p.wake(wakeKey{}, true)
	return nil
}

func (ps *pauses) hook(step string, groups []string) {
	if ps.testHook != nil {
		ps.testHook(step, groups)
	}
}

func samePaused(a, b *paused) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.all == b.all && slices.Equal(a.kinds, b.kinds)
}

func samePauses(a, b map[string]*paused) bool {
	if len(a) != len(b) {
		return false
	}
	for g, s := range a {
		if !samePaused(s, b[g]) {
			return false
		}
	}
	return true
}
