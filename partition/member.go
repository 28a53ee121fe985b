package partition

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/gather"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
)

// Member is one member of a group. Create it with New, then Start it; Stop
// it to leave the group gracefully. A stopped Member cannot be restarted.
type Member struct {
	cfg         Config
	pool        *pgxpool.Pool // the member's own small pool, its lease client's (see store.DerivePool)
	closePool   func()
	listen      store.Session // db's listening session, shared (listenLoop)
	schema      string
	leases      *lease.Client
	q           store.PartitionSQL
	incarnation string
	log         *slog.Logger
	fails       *lograte.Limiter // repeated failures, by kind
	clock       lease.Clock

	ctx    context.Context // lifecycle: cancelled by Stop
	cancel context.CancelFunc
	wake   chan struct{}
	loops  sync.WaitGroup // heartbeat, listen and reconcile loops

	listening atomic.Bool  // the listener listens: notifications arrive (listenLoop)
	gathering atomic.Bool  // a wake for notifications is due (gatherPoke)
	reads     atomic.Int64 // membership reads (reconcile), for tests
	// handoffPolls counts the reconcile rounds in a row that found a wanted
	// partition held by a live member (handoffPoll); atomic for tests.
	handoffPolls atomic.Int64
	// wanted is the owner of each partition in the last assignment
	// (reconcile), for the listener (notified): nil before the first.
	wanted   atomic.Pointer[[]string]
	wg       sync.WaitGroup // serve goroutines, one per claim, until its release (see release.go)
	releases *gather.Batcher[pendingRelease]
	// lateRelease is the const, but for tests (SetLateRelease).
	lateRelease time.Duration

	// Owned by the reconcile goroutine.
	lastLive     []string // the last assignment's member set (sorted by the view)
	lastOwners   []string
	failedRounds int          // reconcile rounds failed in a row (retryAfter)
	reported     map[int]bool // the partitions held at the last "assignment changed" line

	life lifecycle.Service // Start and Stop: once each, serialised

	mu       sync.Mutex
	claims   map[int]*claim
	failure  error
	failures map[int]int       // consecutive early returns of Run per partition
	cooldown map[int]time.Time // partitions whose Run returned early: not before then
	lost     int               // claims ended by a lost lease since the last "assignment changed" line
}

// claim is this member's hold on one partition, from grant to release.
type claim struct {
	p      int
	l      *lease.Lease
	cancel context.CancelCauseFunc
	ending bool
}

// New returns a Member of cfg.Group in db. It validates cfg and does no
// I/O.
func New(db *leasehold.DB, cfg Config) (*Member, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var inc [8]byte
	rand.Read(inc[:])
	incarnation := hex.EncodeToString(inc[:])
	cfg.Lease.Owner = cfg.ID + "#" + incarnation
	leases, err := lease.New(db, cfg.Lease)
	if err != nil {
		return nil, err
	}
	lc := leases.Config()
	cfg.Lease = lc
	if cfg.HandoffTimeout == 0 {
		cfg.HandoffTimeout = lc.TTL
	}
	st, err := store.For(db.Schema())
	if err != nil {
		leases.Close(context.Background())
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	// The lease client's pool (the same size and timeouts: one pool, see
	// store.DerivePool).
	own, closePool, err := store.DerivePool(db.Pool(), lc.MaxConns, lc.StatementTimeout, db.TransactionPooling())
	if err != nil {
		leases.Close(context.Background())
		return nil, err
	}
	log := db.Logger().With("group", cfg.Group, "member", cfg.ID)
	fails, err := lograte.New(log, lograte.Config{Now: lc.Clock.Now,
		AfterFunc: func(d time.Duration, f func()) { lc.Clock.AfterFunc(d, f) }})
	if err != nil {
		closePool()
		leases.Close(context.Background())
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{
		cfg: cfg, pool: own, closePool: closePool, listen: db.Listen(), schema: st.Schema, leases: leases, q: st.Partition,
		incarnation: incarnation,
		log:         log,
		fails:       fails,
		clock:       lc.Clock,
		reported:    make(map[int]bool),
		ctx:         ctx, cancel: cancel,
		wake:     make(chan struct{}, 1),
		cooldown: make(map[int]time.Time),
		claims:   make(map[int]*claim),
		failures: make(map[int]int),
	}
	m.releases = newReleaser(m)
	m.lateRelease = lateRelease
	return m, nil
}

// ID returns the member id.
func (m *Member) ID() string { return m.cfg.ID }

// Start creates the group if it does not exist (checking the partition
// count if it does), joins it and starts claiming partitions. ctx bounds
// the start-up only; the Member runs until Stop. If another incarnation's
// membership of the same ID has not expired (a crashed predecessor, or a
// live twin), Start waits for it to expire, at most one membership TTL plus
// one heartbeat interval; if it is renewed meanwhile, or outlasts that, Start
// returns ErrDuplicateMember. If Start fails, the Member
// is stopped. A second Start returns ErrStarted; a Start on a stopped
// Member returns ErrStopped. A Stop during Start waits for it.
func (m *Member) Start(ctx context.Context) error {
	return m.life.Start(ctx, lifecycle.Refusals{Started: ErrStarted, Stopped: ErrStopped}, m.start, m.shutdown)
}

// start is Start's work, run once.
func (m *Member) start(ctx context.Context) error {
	if err := m.join(ctx); err != nil {
		return err
	}
	m.log.Info("partition: joined", "partitions", m.cfg.Partitions, "incarnation", m.incarnation)
	for _, loop := range []func(){m.heartbeatLoop, m.listenLoop, m.reconcileLoop} {
		m.loops.Add(1)
		go func() {
			defer m.loops.Done()
			loop()
		}()
	}
	return nil
}

func (m *Member) join(ctx context.Context) error {
	// The token regression guard, before the first claim (the lease
	// client would run it at its first grant): so that a failure shows at
	// Start, not as claims that keep failing. (The lease client tries a
	// timed-out guard again, a few times.)
	if err := m.leases.GuardTokens(ctx, 0); err != nil {
		return err
	}
	stored, joined, err := m.createGroup(ctx)
	if err != nil {
		return err
	}
	if stored != m.cfg.Partitions {
		return &CountError{Group: m.cfg.Group, Configured: m.cfg.Partitions, Stored: stored}
	}
	if joined {
		return nil
	}
	return m.joinID(ctx) // the id is in use by another incarnation
}

// joinTimeout bounds each statement of createGroup when Start's ctx has no
// deadline (or a later one).
const joinTimeout = 30 * time.Second

// createGroup creates the group unless it exists, reads its partition
// count and, if the count is the configured one, joins the group (and
// wakes its members), all sent in one round trip. The group's creation is
// a transaction bounded by Start's ctx and joinTimeout rather than by the
// member pool's renew-interval timeouts: a loaded server (or a concurrent
// creator's slow commit) may take longer than a renew interval, and Start
// runs once; the join, after it, is a heartbeat, under the pool's
// timeouts. A server timeout (a starved server) is tried again a few times
// (joinAttempts), never a connection failure (a dead database fails Start
// at once). joined is false when another incarnation's membership of the
// id has not expired (joinID then waits for it).
func (m *Member) createGroup(ctx context.Context) (stored int, joined bool, err error) {
	err = m.retryTimeouts(ctx, "creating or joining the group", func() (err error) {
		stored, joined, err = m.tryCreateGroup(ctx)
		return err
	})
	return stored, joined, err
}

// retryTimeouts runs fn, a step of Start, again while the server cuts its
// statement short (store.IsServerTimeout: a starved server), up to
// joinAttempts times in all, after a growing pause; any other error
// (a dead database) is returned at once.
func (m *Member) retryTimeouts(ctx context.Context, what string, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == joinAttempts || !store.IsServerTimeout(err) {
			return err
		}
		m.log.Warn("partition: "+what+" timed out; trying again", "attempt", attempt, "err", err)
		if !m.waitCtx(ctx, time.Duration(attempt)*100*time.Millisecond, nil) {
			return err
		}
	}
}

// joinAttempts bounds the attempts of a step of Start (retryTimeouts).
const joinAttempts = 4

func (m *Member) tryCreateGroup(ctx context.Context) (stored int, joined bool, err error) {
	timeout := joinTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(d), time.Millisecond))
	}
	b := withTimeouts(timeout)
	b.Queue(m.q.CreateGroup, m.cfg.Group, m.cfg.Partitions)
	b.Queue(m.q.GroupCount, m.cfg.Group).QueryRow(func(r pgx.Row) error { return r.Scan(&stored) })
	b.Queue("COMMIT")
	b.Queue(m.q.Join, m.cfg.Group, m.cfg.ID, m.incarnation, m.cfg.Lease.TTL.Microseconds(), m.q.Channel,
		m.cfg.Partitions).QueryRow(func(r pgx.Row) error {
		var fresh bool // a new membership (not one of this incarnation's)
		var woke *int
		switch err := r.Scan(&fresh, &woke); {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // another incarnation's, or another partition count
		case err != nil:
			return err
		}
		joined = true
		return nil
	})
	if err := m.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, false, m.dbErr("create or join group", err)
	}
	return stored, joined, nil
}

// joinID joins under the member id. A row of another incarnation that has
// not expired is either a crashed predecessor's (a supervisor restarting a
// fixed ID within one TTL of a crash) or a live twin's; the row alone
// cannot tell them apart, so joinID waits for it to expire, bounded by one
// membership TTL plus one heartbeat interval (the row's remaining time is
// read on the database clock, the wait runs on the member's clock) and by
// ctx. A row that is renewed meanwhile (a later heartbeat, or another
// incarnation) belongs to a live process: ErrDuplicateMember. Taking the
// row over early is never safe: a paused twin would resume with a
// membership it believes it has.
func (m *Member) joinID(ctx context.Context) error {
	bound := m.cfg.Lease.TTL + m.cfg.Lease.RenewInterval
	start := m.clock.Now()
	var first *stale
	for {
		// Under the member pool's timeouts (a renew interval): a starved
		// server's timeout is tried again, as createGroup's.
		err := m.retryTimeouts(ctx, "joining", func() error { return m.heartbeat(ctx) })
		if !errors.Is(err, ErrDuplicateMember) {
			return err
		}
		cur, err := m.readMember(ctx)
		if err != nil {
			return err
		}
		if cur == nil {
			continue // the row was deleted meanwhile: join again
		}
		if first == nil {
			first = cur
			m.log.Warn("partition: member id in use by another incarnation; waiting for its membership to expire",
				"other_incarnation", cur.incarnation, "expires_in", cur.left, "bound", bound)
		} else if cur.incarnation != first.incarnation || !cur.heartbeat.Equal(first.heartbeat) {
			return fmt.Errorf("%w: group %q id %q: incarnation %s heartbeats", ErrDuplicateMember,
				m.cfg.Group, m.cfg.ID, cur.incarnation)
		}
		waited := m.clock.Now().Sub(start)
		if waited+cur.left > bound {
			return fmt.Errorf("%w: group %q id %q: incarnation %s's membership still has %v to run after %v",
				ErrDuplicateMember, m.cfg.Group, m.cfg.ID, cur.incarnation, cur.left, waited)
		}
		// Just past the expiry: the database clock decides, so a little
		// more than the time left.
		if !m.waitCtx(ctx, max(cur.left, 0)+10*time.Millisecond, nil) {
			return fmt.Errorf("partition: join group %q as %q: waiting for the membership of incarnation %s "+
				"(a crashed predecessor or a live twin) to expire: %w", m.cfg.Group, m.cfg.ID, cur.incarnation, context.Cause(ctx))
		}
	}
}

// stale is a membership row of another incarnation.
type stale struct {
	incarnation string
	heartbeat   time.Time
	left        time.Duration // until it expires, on the database clock
}

// readMember reads the membership row of this member's id; nil if none.
func (m *Member) readMember(ctx context.Context) (*stale, error) {
	var s stale
	var secs float64
	err := m.pool.QueryRow(ctx, m.q.Member, m.cfg.Group, m.cfg.ID).Scan(&s.incarnation, &s.heartbeat, &secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, store.ClassifyRead("partition", "read membership", m.cfg.Group, err)
	}
	s.left = time.Duration(secs * float64(time.Second))
	return &s, nil
}

func (m *Member) dbErr(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("partition: %s %q: %w", op, m.cfg.Group, ErrGroupNotFound)
	}
	return store.Classify("partition", op, m.cfg.Group, err)
}

// Stop leaves the group gracefully, bounded by ctx: it stops the member's
// loops, removes the membership (so the others rebalance at once), cancels
// every Run with ErrStopped, waits for them (each at most HandoffTimeout),
// releases the partitions and closes the member's connections. Stop on a
// member that was never started only closes its connections; Stop after a
// failed Start returns the error of the clean-up that Start ran. A second
// Stop returns the first one's result.
func (m *Member) Stop(ctx context.Context) error {
	return m.life.Stop(ctx, m.shutdown, func(ctx context.Context) error {
		m.cancel()
		err := m.leases.Close(ctx)
		m.closePool()
		return err
	})
}

// shutdown stops the loops first, so no heartbeat can re-insert the
// membership after it is deleted and no claim starts after endAll.
func (m *Member) shutdown(ctx context.Context) error {
	m.cancel()
	var errs []error
	if err := waitCtx(ctx, &m.loops); err != nil {
		errs = append(errs, err)
	}
	if _, err := m.pool.Exec(ctx, m.q.Leave, m.cfg.Group, m.cfg.ID, m.incarnation, m.q.Channel); err != nil {
		errs = append(errs, m.dbErr("leave", err))
	}
	held := m.endAll(ErrStopped)
	if err := waitCtx(ctx, &m.wg); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, m.leases.Close(ctx))
	m.closePool()
	m.fails.Close()
	m.log.Info("partition: left", "released", held)
	return errors.Join(errs...)
}

// waitCtx waits for wg or ctx.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("partition: stop: %w", context.Cause(ctx))
	}
}

// Err returns the error that ended the member's claims, if any (such as
// ErrDuplicateMember).
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failure
}

// Owned returns the partitions this member holds now, with their tokens.
func (m *Member) Owned() map[int]Ownership {
	m.mu.Lock()
	held := make([]*claim, 0, len(m.claims))
	for _, c := range m.claims {
		if !c.ending {
			held = append(held, c)
		}
	}
	m.mu.Unlock()
	out := make(map[int]Ownership, len(held))
	for _, c := range held {
		if c.l.Err() == nil { // may run loss hooks: outside m.mu
			out[c.p] = Ownership{Group: m.cfg.Group, Partition: c.p, Token: c.l.Token(), Lease: c.l}
		}
	}
	return out
}

// poke wakes the reconcile loop.
func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// wait waits d on the member's clock, or until wake fires (a nil wake never
// does); false when the member stops.
func (m *Member) wait(d time.Duration, wake <-chan struct{}) bool { return m.waitCtx(m.ctx, d, wake) }

// waitCtx is wait, ending early (false) when ctx ends.
func (m *Member) waitCtx(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := make(chan struct{})
	timer := m.clock.AfterFunc(d, func() { close(t) })
	defer timer.Stop()
	select {
	case <-t:
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}
