package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
)

// River's settings are those of River's own benchmark (cmd/river/riverbench
// in River's repository): a fetch cooldown of 2ms, a poll interval of 20ms
// and 2,000 workers on the default queue ("much better than the client's
// default values"). Completions go through River's default batch completer.
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
	riverMaxWorkers        = 2000
	// riverEventBuffer is the subscription's channel size: River drops the
	// events that overflow it, and the suite counts jobs by their events.
	riverEventBuffer = 1 << 18
)

// riverSystem is River, on a database of its own on the same server.
type riverSystem struct {
	q        *queueBench
	pool     *pgxpool.Pool // --conns connections: River's whole client runs on it
	driver   *riverpgxv5.Driver
	inserter *river.Client[pgx.Tx] // insert-only client, as an application's enqueuing side
	// workers, if not 0, is MaxWorkers in every case (the tx-one-row
	// variant with as many workers as connections).
	workers int
}

// withWorkers returns s with MaxWorkers n in every case.
func (s *riverSystem) withWorkers(n int) *riverSystem {
	v := *s
	v.workers = n
	return &v
}

// maxWorkers returns River's MaxWorkers for case c: the suite's
// --concurrency in the cases that give both systems one concurrency budget
// (io-10ms, hol, fair), else --river-workers (River's benchmark's 2000).
func (s *riverSystem) maxWorkers(c string) int {
	switch {
	case s.workers > 0:
		return s.workers
	case c == caseIO || c == caseHOL || c == caseFair:
		return s.q.f.concurrency
	}
	return s.q.f.riverWorkers
}

// newRiverSystem migrates River's tables into the database pool is on and
// creates the effects table there.
func newRiverSystem(ctx context.Context, q *queueBench, pool *pgxpool.Pool) (*riverSystem, error) {
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate River: %w", err)
	}
	if _, err := pool.Exec(ctx, queueCreateEffects); err != nil {
		return nil, fmt.Errorf("create River's effects table: %w", err)
	}
	// The inserter notifies the workers' client of new jobs at most once
	// per FetchCooldown per queue: the same short cooldown.
	ins, err := river.NewClient(driver, &river.Config{FetchCooldown: riverFetchCooldown, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	return &riverSystem{q: q, pool: pool, driver: driver, inserter: ins}, nil
}

func (s *riverSystem) name() string { return sysQueueRiver }

func (s *riverSystem) settings() string {
	return fmt.Sprintf("River %s with riverpgxv5: one Client, default queue with MaxWorkers %d (%d in io-10ms, hol and fair; "+
		"tx-one-row also with %d, its pool's size, the better of the two reported), FetchCooldown %v, "+
		"FetchPollInterval %v (River's own benchmark settings), default batch completer, LISTEN/NOTIFY on; "+
		"an insert-only Client (FetchCooldown %v) for Insert / InsertMany; tx-one-row with river.JobCompleteTx; "+
		"pool of %d conns", riverVersion, s.q.f.riverWorkers, s.q.f.concurrency, s.q.f.conns, riverFetchCooldown,
		riverFetchPollInterval, riverFetchCooldown, s.q.f.conns)
}

// riverVersion is the River release the bench module requires (go.mod).
const riverVersion = "v0.51.2"

func (s *riverSystem) reset(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "TRUNCATE river_job, "+queueEffectsTable); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

func (s *riverSystem) checkpoint(ctx context.Context) error {
	return checkpoint(ctx, s.pool)
}

func (s *riverSystem) tally(ctx context.Context) (tally, error) {
	return tallyJobs(ctx, s.pool, "river_job", "available")
}

func (s *riverSystem) enqueue(ctx context.Context, c string, first, n int) ([]int64, error) {
	params := make([]river.InsertManyParams, n)
	for k := range params {
		params[k].Args = jobArgs(c, first+k)
	}
	res, err := s.inserter.InsertMany(ctx, params)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(res))
	for k, r := range res {
		ids[k] = r.Job.ID
	}
	return ids, nil
}

func (s *riverSystem) enqueueOne(ctx context.Context, c string, i int) error {
	_, err := s.inserter.Insert(ctx, jobArgs(c, i), nil)
	return err
}

// riverRun is a River Client working jobs, and the goroutine counting its
// completion events.
type riverRun struct {
	ctx     context.Context
	client  *river.Client[pgx.Tx]
	events  <-chan *river.Event
	unsub   func()
	done    chan struct{}
	mu      sync.Mutex
	err     error
	b       *burn
	started bool
	c       string
}

// start builds the Client and subscribes to its completion events. A job
// counts as finished when River reports it completed: its batch completer
// has written the completion (for tx-one-row, the handler's transaction
// committed it before). Its latency is from its attempted_at (set when
// River's producer locked it) until then.
func (s *riverSystem) start(ctx context.Context, c string, b *burn, started func(int)) (queueRun, error) {
	ws := river.NewWorkers()
	switch c {
	case caseTxOneRow:
		river.AddWorker(ws, river.WorkFunc(func(ctx context.Context, j *river.Job[rowJob]) error {
			return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, queueInsertEffect, j.ID, s.q.key(j.Args.N), int64(j.Attempt)); err != nil {
					return err
				}
				_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, j)
				return err
			})
		}))
	case caseIO, caseHOL, caseFair:
		river.AddWorker(ws, river.WorkFunc(func(_ context.Context, j *river.Job[noopJob]) error {
			if started != nil {
				started(j.Args.N)
			}
			time.Sleep(s.q.sleepOf(c, j.Args.N))
			return nil
		}))
	default:
		river.AddWorker(ws, river.WorkFunc(func(_ context.Context, j *river.Job[noopJob]) error {
			if started != nil {
				started(j.Args.N)
			}
			return nil
		}))
	}
	client, err := river.NewClient(s.driver, &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.maxWorkers(c)}},
		Workers:           ws,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	events, unsub := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: riverEventBuffer,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
	r := &riverRun{ctx: ctx, client: client, events: events, unsub: unsub, done: make(chan struct{}), b: b, c: c}
	go r.count()
	return r, nil
}

// count credits completion events to the burn, on slot 0 (one goroutine).
func (r *riverRun) count() {
	defer close(r.done)
	s := r.b.slots[0]
	for ev := range r.events {
		if ev.Kind != river.EventKindJobCompleted || ev.Job.State != rivertype.JobStateCompleted {
			msg := fmt.Sprintf("job %d: event %s, state %s", ev.Job.ID, ev.Kind, ev.Job.State)
			if n := len(ev.Job.Errors); n > 0 {
				msg += ": " + ev.Job.Errors[n-1].Error
			}
			r.mu.Lock()
			if r.err == nil {
				r.err = errors.New(msg)
			}
			r.mu.Unlock()
			continue
		}
		if r.b.stopped.Load() {
			continue
		}
		now := time.Now()
		if ev.Job.AttemptedAt != nil {
			s.mu.Lock()
			s.lat = append(s.lat, now.Sub(*ev.Job.AttemptedAt))
			s.mu.Unlock()
		}
		if r.b.track {
			r.b.completed([]int64{ev.Job.ID}, now)
		}
		r.b.finish(1, now)
	}
}

func (r *riverRun) open() error {
	var err error
	pprof.Do(r.ctx, pprof.Labels("system", sysQueueRiver, "case", r.c), func(ctx context.Context) {
		err = r.client.Start(ctx)
	})
	r.started = err == nil
	return err
}

// stop stops the Client (it waits for running jobs and its completer),
// then ends the subscription and the counting goroutine.
func (r *riverRun) stop(ctx context.Context) error {
	var err error
	if r.started {
		err = r.client.Stop(ctx)
	}
	r.unsub()
	select {
	case <-r.done:
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(err, r.err)
}
