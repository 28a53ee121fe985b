package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
)

// WorkerConfig configures one worker process (RunWorker). The orchestrator
// passes it as the flags of the hidden `leasehold chaos worker` command.
type WorkerConfig struct {
	// ID is the worker's member id. Required.
	ID string
	// DatabaseURL is the database, through the worker's fault proxy.
	// Required.
	DatabaseURL string
	// Env is the run's schema, group and partition count.
	Env Env
	// Workload names the workload. Defaults to "queue".
	Workload string
	// TTL is the lease TTL. Defaults to 2s.
	TTL time.Duration
	// Seed seeds the handler stalls. Defaults to 0.
	Seed int64
	// StallProbability is the chance that a handler run stalls past the
	// TTL, ignoring its context. Defaults to 0.
	StallProbability float64
	// Unfenced applies the effects outside the fenced transaction (the
	// control). Defaults to false.
	Unfenced bool
	// RelayKill is the probability that the worker kills itself (SIGKILL)
	// right after one of its relays committed a Kafka transaction, before
	// anything after the commit (kafka-out; drawn per record published
	// from a source seeded by Seed and ID). Defaults to 0: never.
	RelayKill float64
	// RelayPause is the probability, per record a relay produced in a
	// Kafka transaction (kafka-out), that the worker stops itself
	// (SIGSTOP) just before that transaction's commit, for 2 to 3 TTLs:
	// it writes the duration to PauseFile, and the orchestrator resumes
	// it (SIGCONT). Drawn from a source seeded by Seed and ID. Defaults to
	// 0: never.
	RelayPause float64
	// PauseFile is where the worker asks the orchestrator to resume it
	// after a relay pause (RelayPause). Required with RelayPause.
	PauseFile string
	// TransactionPooling: DatabaseURL goes through PgBouncer in
	// transaction mode (see WorkerEnv). Defaults to false.
	TransactionPooling bool
	// History is the JSON-lines file the worker appends its history to.
	// Required.
	History string
	// SkewFile holds the lease clock's offset in milliseconds; the worker
	// polls it. Defaults to none (no skew).
	SkewFile string
	// Logger receives the worker's logs. Defaults to a discarding logger.
	Logger *slog.Logger
}

// RunWorker runs one worker process until ctx ends (SIGTERM), then stops
// it gracefully.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.ID == "" || cfg.DatabaseURL == "" || cfg.History == "" {
		return fmt.Errorf("%w: worker needs an id, a database URL and a history file", ErrInvalidConfig)
	}
	if cfg.Workload == "" {
		cfg.Workload = "queue"
	}
	wl, err := WorkloadNamed(cfg.Workload)
	if err != nil {
		return err
	}
	if cfg.TTL == 0 {
		cfg.TTL = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rec, err := NewRecorder(cfg.History, cfg.ID)
	if err != nil {
		return err
	}
	defer rec.Close()

	clock := &SkewClock{}
	if cfg.SkewFile != "" {
		go followSkew(ctx, cfg.SkewFile, clock, rec)
	}

	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("chaos: database URL: %w", err)
	}
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	pc.MaxConns = int32(min(cfg.Env.Partitions+8, 40))
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("chaos: database: %w", err)
	}
	defer pool.Close()

	st := newStaller(cfg.Seed, cfg.ID, cfg.StallProbability, cfg.TTL)
	env := WorkerEnv{
		Env: cfg.Env, ID: cfg.ID, Recorder: rec, Stall: st.next, Unfenced: cfg.Unfenced, Logger: cfg.Logger,
		RelayKill:          newChance(cfg.Seed, "relay-kill/"+cfg.ID, cfg.RelayKill),
		PauseFile:          cfg.PauseFile,
		TransactionPooling: cfg.TransactionPooling,
		Lease:              lease.Config{TTL: cfg.TTL, Clock: clock, Hooks: recordHooks(rec)},
	}
	if cfg.RelayPause > 0 && cfg.PauseFile != "" {
		// 2 to 3 TTLs: the partition's next owner takes it over (and
		// initialises its producer) about a TTL after the pause began.
		next := newStaller(cfg.Seed, "relay-pause/"+cfg.ID, cfg.RelayPause, cfg.TTL).next
		env.RelayPause = func() (bool, time.Duration) {
			ok, d := next()
			return ok, d + cfg.TTL/2
		}
	}
	err = wl.Work(ctx, pool, env)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// recordHooks records grants, losses and releases of partition leases.
func recordHooks(rec *Recorder) lease.Hooks {
	part := func(name string) (int, bool) {
		i := strings.LastIndexByte(name, '/')
		if !strings.HasPrefix(name, "partition/") || i < 0 {
			return 0, false
		}
		p, err := strconv.Atoi(name[i+1:])
		return p, err == nil
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	return lease.Hooks{
		OnAcquire: func(e lease.AcquireEvent) {
			for i, name := range e.Granted {
				if p, ok := part(name); ok {
					rec.Record(Event{Type: EventGrant, Lease: name, Partition: p, Token: int64(e.Tokens[i])})
				}
			}
		},
		OnLoss: func(e lease.LossEvent) {
			if p, ok := part(e.Name); ok {
				rec.Record(Event{Type: EventLoss, Lease: e.Name, Partition: p, Token: int64(e.Token), Err: errText(e.Err)})
			}
		},
		OnRelease: func(e lease.ReleaseEvent) {
			if p, ok := part(e.Name); ok {
				rec.Record(Event{Type: EventRelease, Lease: e.Name, Partition: p, Token: int64(e.Token), Err: errText(e.Err)})
			}
		},
	}
}

// SkewClock is the real clock shifted by an offset that can change while it
// runs: a clock stepped forwards or backwards. Now includes the offset in
// both its wall and monotonic readings, so intervals measured across a
// change include the step, as they would on a clock without a monotonic
// reading. Timers run on real time.
type SkewClock struct {
	offset atomic.Int64
}

var _ lease.Clock = (*SkewClock)(nil)

// Set sets the offset.
func (c *SkewClock) Set(d time.Duration) { c.offset.Store(int64(d)) }

// Offset returns the offset.
func (c *SkewClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Now returns the real time plus the offset.
func (c *SkewClock) Now() time.Time { return time.Now().Add(c.Offset()) }

// AfterFunc is time.AfterFunc: a duration is not skewed.
func (c *SkewClock) AfterFunc(d time.Duration, f func()) lease.Timer { return time.AfterFunc(d, f) }

// skewPoll is how often a worker reads its skew file.
const skewPoll = 50 * time.Millisecond

// followSkew sets clock's offset from the skew file whenever it changes. A
// file is polled rather than a signal sent, so that a skew can never reach
// a process before it is ready for it.
func followSkew(ctx context.Context, path string, clock *SkewClock, rec *Recorder) {
	last := ""
	t := time.NewTicker(skewPoll)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && string(b) != last {
			last = string(b)
			if ms, err := strconv.ParseInt(strings.TrimSpace(last), 10, 64); err != nil {
				rec.Record(Event{Type: EventSkew, Err: err.Error()})
			} else {
				clock.Set(time.Duration(ms) * time.Millisecond)
				rec.Record(Event{Type: EventSkew, Skew: clock.Offset()})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// writeSkew sets a worker's skew file atomically.
func writeSkew(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(d.Milliseconds(), 10)), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
