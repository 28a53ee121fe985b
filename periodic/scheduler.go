package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
)

// Scheduler runs a group's schedules: while it is the group's leader it
// enqueues each slot that comes due, once. Create it with New, Start it,
// Stop it. Run one in every worker of the group (worker.Config.Schedules
// does): one of them leads at a time, and another takes over within about
// a lease TTL when the leader stops or is cut off.
type Scheduler struct {
	cfg    Config
	scheds []*sched
	db     *leasehold.DB
	leases *lease.Client
	fence  *lease.Fence
	jobs   *queue.Client
	q      store.PeriodicSQL
	name   string // the leader lease
	log    *slog.Logger
	hooks  hooks

	life   lifecycle.Service
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	leading fence.Token // the token of this scheduler's leadership, 0 when it does not lead
}

// hooks observe and interfere with the leader (export_test.go).
type hooks struct {
	// beforeCommit runs in a slot transaction after its writes, before the
	// fence check and COMMIT.
	beforeCommit func(ctx context.Context, token fence.Token, slots []Slot)
	// attempt reports each slot transaction's outcome.
	attempt func(token fence.Token, slots []Slot, err error)
	// noFence runs slot transactions without the fence check: the
	// negative control.
	noFence bool
}

// Slot is one slot a leader records: the schedule's firing at At.
type Slot struct {
	// Schedule is the schedule's name.
	Schedule string
	// At is the slot's time, in UTC.
	At time.Time
	// Missed is how many earlier slots of the schedule no leader enqueued
	// that this slot accounts for (collapsed into it, or skipped).
	Missed int
	// Skip is true when the slot is recorded but not enqueued (MissedSkip).
	Skip bool
	// JobID is the enqueued job's id; 0 if none was (a skipped slot, or a
	// duplicate of a pending job with the same UniqueKey).
	JobID int64
}

// New returns a Scheduler of cfg.Group in db; it logs to db's logger. It
// validates cfg (a bad schedule gives a *ScheduleError) and does no I/O.
func New(db *leasehold.DB, cfg Config) (*Scheduler, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	cfg, scheds, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	lc := cfg.Lease
	lc.Owner = cfg.ID
	leases, err := lease.New(db, lc)
	if err != nil {
		return nil, fmt.Errorf("%w: Lease: %w", ErrInvalidConfig, err)
	}
	f, err := lease.NewFence(db, cfg.Fence)
	if err != nil {
		leases.Close(context.Background())
		return nil, fmt.Errorf("%w: Fence: %w", ErrInvalidConfig, err)
	}
	jobs, err := queue.New(db, queue.Config{})
	if err != nil {
		leases.Close(context.Background())
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Scheduler{
		cfg: cfg, scheds: scheds, db: db, leases: leases, fence: f, jobs: jobs, q: st.Periodic,
		name: LeasePrefix + cfg.Group,
		log:  db.Logger().With("component", "periodic", "group", cfg.Group, "member", cfg.ID),
	}, nil
}

// ID returns the scheduler's holder id.
func (s *Scheduler) ID() string { return s.cfg.ID }

// Leading returns the token of this scheduler's leadership, and whether it
// leads now (by its own view: a leader cut off from the database finds out
// at its lease's local deadline).
func (s *Scheduler) Leading() (fence.Token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading, s.leading != 0
}

// Start starts competing for the group's leadership; ctx bounds the start
// only (Start does no I/O). A second Start returns ErrStarted; a Start on a
// stopped Scheduler returns ErrStopped.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.life.Start(ctx, lifecycle.Refusals{Started: ErrStarted, Stopped: ErrStopped}, func(context.Context) error {
		run, cancel := context.WithCancel(context.WithoutCancel(ctx))
		s.cancel, s.done = cancel, make(chan struct{})
		go func() {
			defer close(s.done)
			s.loop(run)
		}()
		return nil
	}, nil)
}

// Stop stops the scheduler, bounded by ctx: it waits for a slot
// transaction in flight, then releases the leader lease so that another
// scheduler takes over at once. When ctx ends first, Stop returns its
// error; the lease then expires after its TTL. A second Stop returns the
// first one's result.
func (s *Scheduler) Stop(ctx context.Context) error {
	return s.life.Stop(ctx, func(ctx context.Context) error {
		s.cancel()
		select {
		case <-s.done:
		case <-ctx.Done():
			s.leases.Close(ctx)
			return fmt.Errorf("periodic: stop: %w", ctx.Err())
		}
		return s.leases.Close(ctx)
	}, func(ctx context.Context) error { return s.leases.Close(ctx) })
}

// loop competes for the leader lease until ctx ends, and leads while it
// holds it.
func (s *Scheduler) loop(ctx context.Context) {
	for ctx.Err() == nil {
		l, err := s.leases.Acquire(ctx, s.name)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Error("periodic: cannot acquire the leader lease", "err", err)
			s.sleep(ctx, s.cfg.RetryDelay, nil)
			continue
		}
		s.lead(ctx, l)
		if ctx.Err() == nil && l.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, s.leases.Config().TTL)
			l.Release(rctx)
			cancel()
		}
	}
}

// sleep waits for d on the clock, or until ctx or stop ends; it returns
// false when ctx ended.
func (s *Scheduler) sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	wake := make(chan struct{})
	t := s.cfg.Clock.AfterFunc(max(d, 0), func() { close(wake) })
	defer t.Stop()
	select {
	case <-wake:
	case <-stop:
	case <-ctx.Done():
		return false
	}
	return true
}

// state is the leader's view of one schedule.
type state struct {
	last   time.Time // the latest recorded slot, or the anchor of a new schedule
	caught bool      // the catch-up after the takeover is done
}

// maxPerPass bounds the slots of one schedule one transaction records.
const maxPerPass = 1000

// lead enqueues slots as they come due while l is held and ctx lasts.
func (s *Scheduler) lead(ctx context.Context, l *lease.Lease) {
	token := l.Token()
	log := s.log.With("token", int64(token))
	took := s.cfg.Clock.Now()
	since := took.Add(-s.cfg.Grace)
	s.setLeading(token)
	defer s.setLeading(0)
	log.Info("periodic: leading", "schedules", len(s.scheds))
	defer func() { log.Info("periodic: no longer leading", "led", s.cfg.Clock.Now().Sub(took), "cause", l.Err()) }()

	var st []state
	var pruned time.Time
	for ctx.Err() == nil && l.Err() == nil {
		if st == nil {
			var err error
			if st, err = s.load(ctx, took); err != nil {
				log.Error("periodic: cannot read the schedules' last slots", "err", err)
				s.sleep(ctx, s.cfg.RetryDelay, l.Done())
				continue
			}
		}
		now := s.cfg.Clock.Now()
		plan, caught := s.plan(st, since, now)
		if len(plan) > 0 {
			prune := now.Sub(pruned) >= time.Minute
			err := s.commit(ctx, token, plan, now, prune)
			if errors.Is(err, fence.ErrFenced) {
				log.Warn("periodic: leadership lost: slot transaction refused by the fence", "err", err)
				return
			}
			if err != nil {
				if ctx.Err() == nil {
					log.Error("periodic: slot transaction failed; retrying", "err", err, "retry_in", s.cfg.RetryDelay)
				}
				st = nil // read the truth again: the commit may have applied
				s.sleep(ctx, s.cfg.RetryDelay, l.Done())
				continue
			}
			if prune {
				pruned = now
			}
			for _, sl := range plan {
				st[sl.index].last = sl.At
				log.Debug("periodic: slot enqueued", "schedule", sl.Schedule, "slot", sl.At, "job_id", sl.JobID,
					"missed", sl.Missed, "skipped", sl.Skip)
				if sl.Missed > 0 || sl.Skip {
					log.Warn("periodic: missed slots", "schedule", sl.Schedule, "slot", sl.At, "missed", sl.Missed,
						"policy", s.scheds[sl.index].Missed.String())
				}
			}
		}
		for i := range st {
			st[i].caught = st[i].caught || caught[i]
		}
		wake := time.Time{}
		for i, sc := range s.scheds {
			if n := sc.next(st[i].last); !n.IsZero() && (wake.IsZero() || n.Before(wake)) {
				wake = n
			}
		}
		if wake.IsZero() {
			wake = now.Add(time.Hour)
		}
		if !s.sleep(ctx, wake.Sub(s.cfg.Clock.Now()), l.Done()) {
			return
		}
	}
}

func (s *Scheduler) setLeading(t fence.Token) {
	s.mu.Lock()
	s.leading = t
	s.mu.Unlock()
}

// load declares the schedules (a new one is anchored at took: its first
// slot is the next one after it) and reads where each resumes: its latest
// recorded slot, else its anchor.
func (s *Scheduler) load(ctx context.Context, took time.Time) ([]state, error) {
	n := len(s.scheds)
	names, specs, policies := make([]string, n), make([]string, n), make([]string, n)
	for i, sc := range s.scheds {
		names[i], specs[i], policies[i] = sc.Name, sc.spec, sc.Missed.String()
	}
	st := make([]state, n)
	index := make(map[string]int, n)
	for i, name := range names {
		index[name] = i
	}
	pool := s.db.Pool()
	rows, err := pool.Query(ctx, s.q.Declare, s.cfg.Group, names, specs, policies, took)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var since time.Time
		if err := rows.Scan(&name, &since); err != nil {
			rows.Close()
			return nil, err
		}
		st[index[name]].last = since
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = pool.Query(ctx, s.q.Last, s.cfg.Group, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var last *time.Time
		if err := rows.Scan(&name, &last); err != nil {
			return nil, err
		}
		if last != nil {
			st[index[name]].last = *last
		}
	}
	return st, rows.Err()
}

// planned is a Slot to record, with its schedule's index.
type planned struct {
	Slot
	index int
}

// plan returns the slots to record at now, earliest first per schedule,
// and which schedules' catch-up it covers. Slots at or before since that
// came due while no leader ran are handled by the schedule's MissedPolicy,
// on the leader's first pass only; later ones are all recorded and
// enqueued.
func (s *Scheduler) plan(st []state, since, now time.Time) ([]planned, []bool) {
	var out []planned
	caught := make([]bool, len(st))
	for i, sc := range s.scheds {
		last := st[i].last
		if !st[i].caught {
			caught[i] = true
			if n, latest := sc.missed(last, since); n > 0 {
				out = append(out, planned{Slot: Slot{Schedule: sc.Name, At: latest, Missed: n - 1,
					Skip: sc.Missed == MissedSkip}, index: i})
				last = latest
			}
		}
		for _, at := range sc.due(last, now, maxPerPass) {
			out = append(out, planned{Slot: Slot{Schedule: sc.Name, At: at}, index: i})
		}
	}
	return out, caught
}
