package partition

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/dbpool"
	"github.com/leasehold/leasehold/lease"
)

// Member is one member of a group. Create it with New, then Start it; Stop
// it to leave the group gracefully. A stopped Member cannot be restarted.
type Member struct {
	cfg         Config
	pool        *pgxpool.Pool // the member's own small pool
	leases      *lease.Client
	q           queries
	channel     string // NOTIFY channel of the schema
	incarnation string
	log         *slog.Logger
	clock       lease.Clock

	// The last assignment, owned by the reconcile goroutine (live is sorted
	// by the view query).
	lastLive   []string
	lastOwners []string

	ctx    context.Context // lifecycle: cancelled by Stop
	cancel context.CancelFunc
	wake   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	claims  map[int]*claim
	state   int // 0 new, 1 started, 2 stopped
	failure error
}

// claim is this member's hold on one partition, from grant to release.
type claim struct {
	p      int
	l      *lease.Lease
	cancel context.CancelCauseFunc
	ending bool
}

// New returns a Member of cfg.Group in the database pool connects to. It
// validates cfg and does no I/O.
func New(pool *pgxpool.Pool, cfg Config) (*Member, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	leases, err := lease.New(pool, cfg.Lease)
	if err != nil {
		return nil, err
	}
	lc := leases.Config()
	cfg.Lease = lc
	if cfg.HandoffTimeout == 0 {
		cfg.HandoffTimeout = lc.TTL
	}
	q, channel, err := render(lc.Schema)
	if err != nil {
		return nil, err
	}
	own, err := dbpool.Derive(pool, 3, lc.StatementTimeout)
	if err != nil {
		return nil, err
	}
	var inc [8]byte
	rand.Read(inc[:])
	ctx, cancel := context.WithCancel(context.Background())
	return &Member{
		cfg: cfg, pool: own, leases: leases, q: q, channel: channel,
		incarnation: hex.EncodeToString(inc[:]),
		log:         lc.Logger.With("group", cfg.Group, "member", cfg.ID),
		clock:       lc.Clock,
		ctx:         ctx, cancel: cancel,
		wake:   make(chan struct{}, 1),
		claims: make(map[int]*claim),
	}, nil
}

// ID returns the member id.
func (m *Member) ID() string { return m.cfg.ID }

// Start creates the group if it does not exist (checking the partition
// count if it does), joins it and starts claiming partitions. ctx bounds
// the start-up only; the Member runs until Stop.
func (m *Member) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.state != 0 {
		m.mu.Unlock()
		return fmt.Errorf("partition: Start: member already started or stopped")
	}
	m.state = 1
	m.mu.Unlock()
	fail := func(err error) error {
		m.mu.Lock()
		m.state = 2
		m.mu.Unlock()
		m.shutdown(ctx)
		return err
	}
	if _, err := m.pool.Exec(ctx, m.q.createGroup, m.cfg.Group, m.cfg.Partitions); err != nil {
		return fail(m.dbErr("create group", err))
	}
	var stored int
	if err := m.pool.QueryRow(ctx, m.q.groupCount, m.cfg.Group).Scan(&stored); err != nil {
		return fail(m.dbErr("read group", err))
	}
	if stored != m.cfg.Partitions {
		return fail(&CountError{Group: m.cfg.Group, Configured: m.cfg.Partitions, Stored: stored})
	}
	if err := m.heartbeat(ctx); err != nil {
		return fail(err)
	}
	m.log.Info("partition: joined", "partitions", m.cfg.Partitions)
	m.goLoop(m.heartbeatLoop)
	m.goLoop(m.listenLoop)
	m.goLoop(m.reconcileLoop)
	return nil
}

func (m *Member) goLoop(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

func (m *Member) dbErr(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("partition: %s %q: %w", op, m.cfg.Group, ErrGroupNotFound)
	}
	return fmt.Errorf("partition: %s %q: %w", op, m.cfg.Group, err)
}

// Stop leaves the group gracefully, bounded by ctx: it removes the
// membership (so the others rebalance at once), cancels every Run with
// ErrStopped, waits for them (each at most HandoffTimeout), releases the
// partitions and closes the member's connections.
func (m *Member) Stop(ctx context.Context) error {
	m.mu.Lock()
	if m.state != 1 {
		m.state = 2
		m.mu.Unlock()
		return nil
	}
	m.state = 2
	m.mu.Unlock()
	return m.shutdown(ctx)
}

func (m *Member) shutdown(ctx context.Context) error {
	m.cancel() // stops the loops: nothing new is claimed
	var errs []error
	if _, err := m.pool.Exec(ctx, m.q.leave, m.cfg.Group, m.cfg.ID, m.incarnation); err != nil {
		errs = append(errs, fmt.Errorf("partition: leave: %w", err))
	} else {
		m.notify(ctx)
	}
	m.endAll(ErrStopped)
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("partition: stop: %w", context.Cause(ctx)))
	}
	errs = append(errs, m.leases.Close(ctx))
	m.pool.Close()
	m.log.Info("partition: left")
	return errors.Join(errs...)
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
	defer m.mu.Unlock()
	out := make(map[int]Ownership, len(m.claims))
	for p, c := range m.claims {
		if !c.ending && c.l.Err() == nil {
			out[p] = Ownership{Group: m.cfg.Group, Partition: p, Token: c.l.Token(), Lease: c.l}
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

// notify wakes the other members of the group.
func (m *Member) notify(ctx context.Context) {
	if _, err := m.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, m.channel, m.cfg.Group); err != nil {
		m.log.Debug("partition: notify failed; members will poll", "err", err)
	}
}

// wait waits d on the member's clock, or until wake fires (a nil wake never
// does); false when the member stops.
func (m *Member) wait(d time.Duration, wake <-chan struct{}) bool {
	t := make(chan struct{})
	timer := m.clock.AfterFunc(d, func() { close(t) })
	defer timer.Stop()
	select {
	case <-t:
		return true
	case <-wake:
		return true
	case <-m.ctx.Done():
		return false
	}
}
