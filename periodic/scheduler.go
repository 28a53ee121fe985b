package periodic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
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

	calling []atomic.Bool // per schedule: a call of its Job is running

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
	jobs, err := queue.New(db, cfg.Queue)
	if err != nil {
		leases.Close(context.Background())
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Scheduler{
		cfg: cfg, scheds: scheds, db: db, leases: leases, fence: f, jobs: jobs, q: st.Periodic,
		name: LeasePrefix + cfg.Group, calling: make([]atomic.Bool, len(scheds)),
		log: db.Logger().With("component", "periodic", "group", cfg.Group, "member", cfg.ID),
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

// Stop stops the scheduler, bounded by ctx: it cancels a slot transaction
// in flight (it rolls back: its slots stay due, and the next leader
// records them), waits for the leader to finish, then releases the leader
// lease so that another scheduler takes over at its next read of the
// lease. When ctx ends first, Stop returns its error; the lease then
// expires after its TTL. A second Stop returns the first one's result.
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
		l, gap, err := s.acquire(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Error("periodic: cannot acquire the leader lease", "err", err)
			s.sleep(ctx, s.cfg.Clock, s.cfg.RetryDelay, nil)
			continue
		}
		s.lead(ctx, l, gap)
		if ctx.Err() == nil && l.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, s.leases.Config().TTL)
			l.Release(rctx)
			cancel()
		}
	}
}

// noGap is the gap of a takeover with no known previous leader.
const noGap time.Duration = -1

// acquire takes the leader lease: it reads the lease row every
// Lease.MaxBackoff while another scheduler holds it, and tries to take it
// once it has ended. It also returns how long no leader ran before the
// grant, by the database's clock: from the previous grant's end (its
// release, or its last renewal for a leader that vanished) to the grant;
// noGap when no previous leadership is known. Measuring the gap on the
// database's clock keeps the missed-slot accounting independent of the
// leaders' clocks.
func (s *Scheduler) acquire(ctx context.Context) (*lease.Lease, time.Duration, error) {
	lc := s.leases.Config()
	for {
		info, err := s.leases.Inspect(ctx, s.name)
		known := err == nil
		switch {
		case errors.Is(err, lease.ErrNotFound):
		case err != nil:
			return nil, 0, err
		case info.Held() && info.Owner != s.cfg.ID:
			if !s.sleep(ctx, lc.Clock, lc.MaxBackoff, nil) {
				return nil, 0, ctx.Err()
			}
			continue
		}
		l, err := s.leases.TryAcquire(ctx, s.name)
		if errors.Is(err, lease.ErrHeld) {
			if !s.sleep(ctx, lc.Clock, lc.MaxBackoff, nil) {
				return nil, 0, ctx.Err()
			}
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		if !known {
			return l, noGap, nil
		}
		// The previous grant (this scheduler's own, when it was still live:
		// its last renewal is recent) ended at its release or last renewal.
		// Another scheduler may have led between the read and the grant;
		// the slots it recorded are not counted missed (they are recorded).
		return l, max(l.AcquiredAt().Sub(info.RenewedAt), 0), nil
	}
}

// missedCut returns the latest time a slot may have come due and be
// handled as missed by a leader that took over at took by its clock and
// at granted by the database's: grace before the earlier of the two.
func missedCut(took, granted time.Time, grace time.Duration) time.Time {
	if !granted.IsZero() && granted.Before(took) {
		took = granted
	}
	return took.Add(-grace)
}

// sleep waits for d on clk, or until ctx or stop ends; it returns false
// when ctx ended.
func (s *Scheduler) sleep(ctx context.Context, clk lease.Clock, d time.Duration, stop <-chan struct{}) bool {
	wake := make(chan struct{})
	t := clk.AfterFunc(max(d, 0), func() { close(wake) })
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

// lead enqueues slots as they come due while l is held and ctx lasts; gap
// is how long no leader ran before l was granted (see acquire).
func (s *Scheduler) lead(ctx context.Context, l *lease.Lease, gap time.Duration) {
	token := l.Token()
	log := s.log.With("token", int64(token))
	took := s.cfg.Clock.Now()
	// The slots up to since that no leader recorded are missed, unless the
	// database's clock says the lease passed on within the grace: then no
	// slot is missed, whatever this clock says (it may run ahead of the
	// previous leader's). since is cut on the database's clock (the grant),
	// or on this one if it is behind: a slot is missed only if it had come
	// due by both, so a leader whose clock runs ahead never counts missed a
	// slot that has not come due (it enqueues it early, as any slot), and
	// one behind never counts missed a slot it has not reached (it
	// enqueues it late).
	since := missedCut(took, l.AcquiredAt(), s.cfg.Grace)
	if gap != noGap && gap <= s.cfg.Grace {
		since = time.Time{}
	}
	s.setLeading(token)
	defer s.setLeading(0)
	log.Info("periodic: leading", "schedules", len(s.scheds), "gap", gap)
	defer func() { log.Info("periodic: no longer leading", "led", s.cfg.Clock.Now().Sub(took), "cause", l.Err()) }()

	var st []state
	var pruned time.Time
	retry := make([]time.Time, len(s.scheds)) // a failed schedule waits until then
	for ctx.Err() == nil && l.Err() == nil {
		if st == nil {
			var err error
			if st, err = s.load(ctx, took); err != nil {
				log.Error("periodic: cannot read the schedules' last slots", "err", err)
				s.sleep(ctx, s.cfg.Clock, s.cfg.RetryDelay, l.Done())
				continue
			}
		}
		now := s.cfg.Clock.Now()
		plan, caught := s.plan(st, retry, since, now)
		plan, failed, running := s.prepare(ctx, token, plan, l.Done())
		for i, err := range failed {
			lvl := slog.LevelError
			if running[i] { // logged when it timed out
				lvl = slog.LevelDebug
			}
			log.Log(ctx, lvl, "periodic: schedule failed; retrying it alone", "schedule", s.scheds[i].Name, "err", err,
				"retry_in", s.cfg.RetryDelay)
			retry[i], caught[i] = now.Add(s.cfg.RetryDelay), false
		}
		if len(plan) > 0 {
			prune := now.Sub(pruned) >= time.Minute
			done, err := s.commitAll(ctx, token, plan, now, prune, log)
			if errors.Is(err, fence.ErrFenced) {
				log.Warn("periodic: leadership lost: slot transaction refused by the fence", "err", err)
				return
			}
			if prune && err == nil {
				pruned = now
			}
			for _, sl := range plan {
				if !done[sl.index] {
					retry[sl.index], caught[sl.index] = now.Add(s.cfg.RetryDelay), false
					continue
				}
				st[sl.index].last = sl.At
				log.Debug("periodic: slot enqueued", "schedule", sl.Schedule, "slot", sl.At, "job_id", sl.JobID,
					"missed", sl.Missed, "skipped", sl.Skip)
				if sl.Missed > 0 || sl.Skip {
					log.Warn("periodic: missed slots", "schedule", sl.Schedule, "slot", sl.At, "missed", sl.Missed,
						"policy", s.scheds[sl.index].Missed.String())
				}
			}
			if len(done) == 0 { // nothing committed: read the truth again (a commit may have applied)
				st = nil
				s.sleep(ctx, s.cfg.Clock, s.cfg.RetryDelay, l.Done())
				continue
			}
		}
		for i := range st {
			st[i].caught = st[i].caught || caught[i]
		}
		wake := time.Time{}
		for i, sc := range s.scheds {
			n := sc.next(st[i].last)
			if n.IsZero() {
				continue
			}
			if n.Before(retry[i]) {
				n = retry[i]
			}
			if wake.IsZero() || n.Before(wake) {
				wake = n
			}
		}
		if wake.IsZero() {
			wake = now.Add(time.Hour)
		}
		if !s.sleep(ctx, s.cfg.Clock, wake.Sub(s.cfg.Clock.Now()), l.Done()) {
			return
		}
	}
}

// commitAll commits plan in one transaction; if that fails (other than by
// the fence) and plan spans several schedules, it commits each schedule's
// slots in a transaction of its own, so that a schedule whose jobs the
// database refuses does not hold the others back. It returns the indexes
// of the schedules whose slots committed, and the last error.
func (s *Scheduler) commitAll(ctx context.Context, token fence.Token, plan []planned, now time.Time, prune bool,
	log *slog.Logger) (map[int]bool, error) {
	done := make(map[int]bool)
	err := s.commit(ctx, token, plan, now, prune)
	if err == nil {
		for _, p := range plan {
			done[p.index] = true
		}
		return done, nil
	}
	if errors.Is(err, fence.ErrFenced) || ctx.Err() != nil || plan[0].index == plan[len(plan)-1].index {
		if ctx.Err() == nil && !errors.Is(err, fence.ErrFenced) {
			log.Error("periodic: slot transaction failed; retrying", "schedule", plan[0].Schedule, "err", err,
				"retry_in", s.cfg.RetryDelay)
		}
		return done, err
	}
	log.Warn("periodic: slot transaction failed; committing each schedule alone", "err", err)
	for from := 0; from < len(plan); {
		to := from + 1
		for to < len(plan) && plan[to].index == plan[from].index {
			to++
		}
		part := plan[from:to]
		if err = s.commit(ctx, token, part, now, false); err == nil {
			done[part[0].index] = true
		} else if errors.Is(err, fence.ErrFenced) || ctx.Err() != nil {
			return done, err
		} else {
			log.Error("periodic: schedule failed; retrying it alone", "schedule", part[0].Schedule,
				"err", &ScheduleError{Index: part[0].index, Name: part[0].Schedule, Reason: "slot transaction failed", Err: err},
				"retry_in", s.cfg.RetryDelay)
		}
		from = to
	}
	return done, err
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

// planned is a Slot to record, with its schedule's index and job.
type planned struct {
	Slot
	index int
	job   queue.Job // set by prepare unless Skip
}

// plan returns the slots to record at now, earliest first per schedule,
// and which schedules' catch-up it covers; a schedule whose retry time is
// after now is left out. Slots at or before since (zero for none) came due
// while no leader ran and are handled by the schedule's MissedPolicy, on
// the leader's first pass only; later ones are all recorded and enqueued.
func (s *Scheduler) plan(st []state, retry []time.Time, since, now time.Time) ([]planned, []bool) {
	var out []planned
	caught := make([]bool, len(st))
	for i, sc := range s.scheds {
		if now.Before(retry[i]) {
			continue
		}
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
