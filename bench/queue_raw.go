package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/partition"
)

// rawQueueSystem is the raw-SQL limit: leasehold's tables and statements, looped
// directly through pgx, without leases, fence checks or handler dispatch.
type rawQueueSystem struct {
	lhTables
	q    *queueBench
	pool *pgxpool.Pool // --conns connections, traced
}

// rawToken is the fencing token the raw-sql baseline records on the jobs it
// completes; it holds no lease and checks no fence.
const rawToken = 1

// rawPoll is how long a raw-sql loop in the steady case waits after an
// empty fetch before fetching again: River's FetchPollInterval in the suite.
const rawPoll = 20 * time.Millisecond

func (s *rawQueueSystem) name() string { return sysQueueRaw }

func (s *rawQueueSystem) settings() string {
	return fmt.Sprintf("one goroutine per partition (%d) looping the Processor's fetch (LIMIT %d) and complete statements, "+
		"no fence; %v sleep after an empty fetch in steady; idle-latency: a LISTEN connection and INSERT + pg_notify; "+
		"plain INSERT (single) and INSERT ... SELECT FROM unnest (batch); pool of %d conns",
		s.q.f.partitions, s.q.f.batch, rawPoll, s.q.f.conns)
}

// enqueue inserts the jobs with one INSERT ... SELECT FROM unnest: what
// queue.Client.EnqueueMany does, without unique keys or per-input results.
func (s *rawQueueSystem) enqueue(ctx context.Context, c string, first, n int) ([]int64, error) {
	parts, keys, args := make([]int32, n), make([]string, n), make([][]byte, n)
	var kind string
	for k := range n {
		i := first + k
		a := jobArgs(c, i)
		b, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		kind, keys[k], args[k] = a.Kind(), s.q.keyOf(c, i), b
		parts[k] = int32(partition.OfString(keys[k], s.q.f.partitions))
	}
	_, err := s.pool.Exec(ctx, s.q.sql.insertMany, queueGroup, parts, keys, kind, args, int32(25))
	return nil, err
}

// enqueueOne inserts one job with a plain INSERT; in the idle-latency case
// the same statement also notifies the listener of the job's partition.
func (s *rawQueueSystem) enqueueOne(ctx context.Context, c string, i int) error {
	a := jobArgs(c, i)
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	key := s.q.keyOf(c, i)
	p := int32(partition.OfString(key, s.q.f.partitions))
	stmt := s.q.sql.insertOne
	if c == caseIdleLatency {
		stmt = s.q.sql.insertNotify
	}
	_, err = s.pool.Exec(ctx, stmt, queueGroup, p, key, a.Kind(), b, int32(25))
	return err
}

// rawQueueRun is the raw loops of one measurement.
type rawQueueRun struct {
	s        *rawQueueSystem
	c        string
	b        *burn
	started  func(int)
	ctx      context.Context
	cancel   context.CancelFunc
	stopping atomic.Bool // steady, idle-latency: stop after the current batch
	listener *pgxpool.Conn
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
}

func (s *rawQueueSystem) start(ctx context.Context, c string, b *burn, started func(int)) (queueRun, error) {
	s.q.tracer.follow(b)
	r := &rawQueueRun{s: s, c: c, b: b, started: started}
	r.ctx, r.cancel = context.WithCancel(ctx)
	if c == caseIdleLatency {
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			r.cancel()
			return nil, err
		}
		if _, err := conn.Exec(ctx, "LISTEN "+rawChannel); err != nil {
			conn.Release()
			r.cancel()
			return nil, err
		}
		r.listener = conn
	}
	return r, nil
}

// rawChannel is the channel the raw-sql idle-latency listener listens on.
const rawChannel = "leasehold_bench_raw"

func (r *rawQueueRun) fail(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *rawQueueRun) open() error {
	labels := pprof.Labels("system", sysQueueRaw, "case", r.c)
	if r.listener != nil {
		r.wg.Add(1)
		go pprof.Do(r.ctx, labels, func(ctx context.Context) {
			defer r.wg.Done()
			r.fail(r.listen(ctx))
		})
		return nil
	}
	for p := range r.s.q.f.partitions {
		r.wg.Add(1)
		go pprof.Do(withSlot(r.ctx, r.b.slots[p]), labels, func(ctx context.Context) {
			defer r.wg.Done()
			r.fail(r.loop(ctx, p))
		})
	}
	return nil
}

// stop lets the loops finish their batch and return. (A finished burndown
// lets them see their empty fetch instead: cancelling a statement in flight
// would close its connection, and the next measurement would pay for a new
// one.) A cut burndown is cancelled.
func (r *rawQueueRun) stop(ctx context.Context) error {
	r.stopping.Store(true)
	if r.listener != nil || (r.c != caseSteady && r.b.done.Load() < r.b.want) {
		r.cancel() // wakes the listener; cuts a burndown
	}
	r.wg.Wait()
	r.cancel()
	if r.listener != nil {
		r.listener.Release()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// loop processes partition p: a burndown until its fetch comes back empty,
// steady state until stopped.
func (r *rawQueueRun) loop(ctx context.Context, p int) error {
	for ctx.Err() == nil && !r.stopping.Load() {
		n, err := r.batch(ctx, p)
		if err != nil {
			return err
		}
		if n == 0 {
			if r.c != caseSteady {
				return nil
			}
			if err := sleepCtx(ctx, rawPoll); err != nil {
				return nil
			}
		}
	}
	return nil
}

// listen waits for notifications and processes the notified partition
// until its fetch comes back empty.
func (r *rawQueueRun) listen(ctx context.Context) error {
	for !r.stopping.Load() {
		n, err := r.listener.Conn().WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		p, err := strconv.Atoi(n.Payload)
		if err != nil || p < 0 || p >= len(r.b.slots) {
			return fmt.Errorf("notification payload %q is not a partition", n.Payload)
		}
		for {
			k, err := r.batch(withSlot(ctx, r.b.slots[p]), p)
			if err != nil && ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			if k == 0 {
				break
			}
		}
	}
	return nil
}

// fetchedJob is a job as the raw-sql loop reads it: the columns the
// Processor scans.
type fetchedJob struct {
	id        int64
	key, kind string
	args      []byte
}

// batch fetches up to --batch due jobs of partition p and completes them:
// no-op cases with one autocommitted complete statement per batch,
// tx-one-row with one BEGIN; INSERT; complete statement; COMMIT per job.
// Columns after the fetch's first seven are not read, and a row without a
// kind (in newer versions: a key's report that its next job is not due) is
// skipped.
func (r *rawQueueRun) batch(ctx context.Context, p int) (int, error) {
	s := r.s
	// The fetch for partition p alone, holding nothing (a raw loop records
	// a batch before it fetches the next): group, partitions, their limits,
	// held ids and their partitions, skipped keys and their partitions,
	// paused kinds.
	rows, err := s.pool.Query(ctx, s.q.sql.fetch, queueGroup, []int32{int32(p)}, []int32{int32(s.q.f.batch)},
		[]int64{}, []int32{}, []string{}, []int32{}, []string{})
	if err != nil {
		return 0, err
	}
	var (
		f       fetchedJob
		kind    *string
		attempt *int
		maxAt   *int
		created *time.Time
	)
	dest := make([]any, max(len(rows.FieldDescriptions()), 7))
	copy(dest, []any{&f.id, &f.key, &kind, &f.args, &attempt, &maxAt, &created})
	var jobs []fetchedJob
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if kind != nil && *kind != "" { // '': a key's wait or a walk position, not a job
			j := f
			j.kind = *kind
			jobs = append(jobs, j)
		}
		f.args = nil // scanned anew into the same variables: do not share
		return nil
	})
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	if r.c == caseTxOneRow {
		for _, j := range jobs {
			if ctx.Err() != nil {
				return len(jobs), nil
			}
			if err := s.one(ctx, j); err != nil {
				return len(jobs), err
			}
		}
		return len(jobs), nil
	}
	k := len(jobs)
	ids, states, spent := make([]int64, k), make([]string, k), make([]int32, k)
	delays, errs := make([]*int64, k), make([]*string, k)
	for i, j := range jobs {
		ids[i], states[i], spent[i] = j.id, "completed", 1
		if r.started != nil {
			var a noopJob
			if err := json.Unmarshal(j.args, &a); err != nil {
				return k, err
			}
			r.started(a.N)
		}
	}
	// One autocommitted statement: the fewest round trips a batch can take.
	tokens := make([]int64, k)
	for i := range tokens {
		tokens[i] = rawToken
	}
	_, err = s.pool.Exec(ctx, s.q.sql.complete, ids, states, spent, delays, errs, tokens, []string(nil))
	return k, err
}

// one runs one tx-one-row job in a transaction of its own: the effect row,
// the complete statement, commit.
func (s *rawQueueSystem) one(ctx context.Context, j fetchedJob) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, queueInsertEffect, j.id, j.key, int64(rawToken)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, s.q.sql.complete, []int64{j.id}, []string{"completed"}, []int32{1},
			[]*int64{nil}, []*string{nil}, []int64{rawToken}, []string(nil))
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("job %d was already finished", j.id)
		}
		return err
	})
}
