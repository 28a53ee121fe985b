package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
)

// leaseSystem runs the lease cases one way: through the lease package or
// with the same statements sent raw. Each worker gets names of its own.
type leaseSystem interface {
	name() string
	// acquirePlan returns the acquire case: each operation acquires a fresh
	// name. With batch > 0 the system forgets, untimed, the leases of each
	// batch before the next, so that it never holds more than workers*batch.
	acquirePlan(tag string, batch int) plan
	// renewPlan acquires per leases for each worker (untimed) and returns
	// the renew case: renew one of the worker's leases, round robin.
	renewPlan(ctx context.Context, tag string, workers, per int) (plan, error)
	// releasePlan returns the release case: release the worker's next
	// lease. Before each batch of batch operations it acquires the batch's
	// leases, untimed; with batch 0, it acquires stock leases per worker up
	// front, and a worker that runs out ends the measurement early.
	releasePlan(tag string, workers, batch, stock int) plan
	// forget makes the system drop the leases it holds, without I/O.
	forget()
}

// The systems, as named in reports.
const (
	sysLeasehold = "leasehold"
	sysRaw       = "raw-sql"
)

// prefillBatch is how many leases one untimed statement acquires when
// building a renew or release case's stock.
const prefillBatch = 1000

// leaseName returns the name of worker w's i-th lease in a measurement.
func leaseName(sys, tag string, w, i int) string {
	b := make([]byte, 0, 48)
	b = append(b, sys...)
	b = append(b, '/')
	b = append(b, tag...)
	b = append(b, "/w"...)
	b = strconv.AppendInt(b, int64(w), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(b)
}

// prefill calls f with names first..first+per-1 of each worker w, in slices
// of at most prefillBatch, on one goroutine per worker, and returns the
// first error.
func prefill(workers, first, per int, f func(w int, names []string) error, sys, tag string) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := first; from < first+per && errs[w] == nil; from += prefillBatch {
				to := min(from+prefillBatch, first+per)
				names := make([]string, 0, to-from)
				for i := from; i < to; i++ {
					names = append(names, leaseName(sys, tag, w, i))
				}
				errs[w] = f(w, names)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// leaseholdSystem runs the cases through a lease.Client.
type leaseholdSystem struct {
	c *lease.Client
}

func (s *leaseholdSystem) name() string { return sysLeasehold }

func (s *leaseholdSystem) acquirePlan(tag string, batch int) plan {
	p := plan{batch: batch, op: func(ctx context.Context, w, i int) (bool, error) {
		_, err := s.c.TryAcquire(ctx, leaseName(sysLeasehold, tag, w, i))
		return true, err
	}}
	if batch > 0 {
		p.prepare = func(context.Context, int) error { s.forget(); return nil }
	}
	return p
}

// hold acquires names first..first+per-1 of each worker in batches.
func (s *leaseholdSystem) hold(ctx context.Context, tag string, workers, first, per int) ([][]*lease.Lease, error) {
	held := make([][]*lease.Lease, workers)
	err := prefill(workers, first, per, func(w int, names []string) error {
		ls, err := s.c.TryAcquireMany(ctx, names...)
		held[w] = append(held[w], ls...)
		return err
	}, sysLeasehold, tag)
	return held, err
}

func (s *leaseholdSystem) renewPlan(ctx context.Context, tag string, workers, per int) (plan, error) {
	held, err := s.hold(ctx, tag, workers, 0, per)
	if err != nil {
		return plan{}, err
	}
	return plan{op: func(ctx context.Context, w, i int) (bool, error) {
		return true, held[w][i%per].Renew(ctx)
	}}, nil
}

func (s *leaseholdSystem) releasePlan(tag string, workers, batch, stock int) plan {
	return releasePlan(batch, stock,
		func(ctx context.Context, first, n int) ([][]*lease.Lease, error) {
			return s.hold(ctx, tag, workers, first, n)
		},
		func(ctx context.Context, l *lease.Lease) error { return l.Release(ctx) })
}

// releasePlan releases leases held in batches of batch (or all stock at
// once): prepare holds the next batch (untimed), op releases one.
func releasePlan[L any](batch, stock int, hold func(ctx context.Context, first, n int) ([][]L, error),
	release func(context.Context, L) error) plan {
	var held [][]L
	base := 0
	return plan{
		batch: batch,
		prepare: func(ctx context.Context, first int) error {
			n := batch
			if n == 0 {
				n = stock
			}
			var err error
			held, err = hold(ctx, first, n)
			base = first
			return err
		},
		op: func(ctx context.Context, w, i int) (bool, error) {
			if i-base >= len(held[w]) {
				return false, nil
			}
			return true, release(ctx, held[w][i-base])
		},
	}
}

// forget makes the Client drop its leases: releasing under a cancelled
// context ends each lease locally and fails before any I/O. Their rows stay
// held in the database until the table is truncated.
func (s *leaseholdSystem) forget() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, l := range s.c.Held() {
		l.Release(ctx)
	}
}

// rawLease is a lease held by the raw-sql system.
type rawLease struct {
	name  string
	token int64
}

// rawSystem runs the lease package's statements directly on a pgxpool of
// the Client's size.
type rawSystem struct {
	pool  *pgxpool.Pool
	q     rawQueries
	owner string
	ttl   int64 // microseconds
}

func (s *rawSystem) name() string { return sysRaw }

func (s *rawSystem) acquirePlan(tag string, batch int) plan {
	return plan{batch: batch, op: func(ctx context.Context, w, i int) (bool, error) {
		n := leaseName(sysRaw, tag, w, i)
		var name string
		var tok int64
		var at, exp time.Time
		err := s.pool.QueryRow(ctx, s.q.acquire, n, s.owner, s.ttl).Scan(&name, &tok, &at, &exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return true, fmt.Errorf("raw acquire %q: held", n)
		}
		return true, err
	}}
}

// hold acquires names first..first+per-1 of each worker in batches.
func (s *rawSystem) hold(ctx context.Context, tag string, workers, first, per int) ([][]rawLease, error) {
	held := make([][]rawLease, workers)
	err := prefill(workers, first, per, func(w int, names []string) error {
		rows, err := s.pool.Query(ctx, s.q.acquireMany, names, s.owner, s.ttl)
		if err != nil {
			return err
		}
		tokens := make(map[string]int64, len(names))
		for rows.Next() {
			var name string
			var tok int64
			var at, exp time.Time
			if err := rows.Scan(&name, &tok, &at, &exp); err != nil {
				rows.Close()
				return err
			}
			tokens[name] = tok
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, n := range names {
			tok, ok := tokens[n]
			if !ok {
				return fmt.Errorf("raw prefill: %q not acquired", n)
			}
			held[w] = append(held[w], rawLease{n, tok})
		}
		return nil
	}, sysRaw, tag)
	return held, err
}

func (s *rawSystem) renewPlan(ctx context.Context, tag string, workers, per int) (plan, error) {
	held, err := s.hold(ctx, tag, workers, 0, per)
	if err != nil {
		return plan{}, err
	}
	return plan{op: func(ctx context.Context, w, i int) (bool, error) {
		l := held[w][i%per]
		rows, err := s.pool.Query(ctx, s.q.renew, []string{l.name}, []int64{l.token}, s.owner, s.ttl)
		if err != nil {
			return true, err
		}
		n := 0
		for rows.Next() {
			var name string
			var exp time.Time
			if err := rows.Scan(&name, &exp); err != nil {
				rows.Close()
				return true, err
			}
			n++
		}
		if err := rows.Err(); err != nil {
			return true, err
		}
		if n != 1 {
			return true, fmt.Errorf("raw renew %q: lost", l.name)
		}
		return true, nil
	}}, nil
}

func (s *rawSystem) releasePlan(tag string, workers, batch, stock int) plan {
	return releasePlan(batch, stock,
		func(ctx context.Context, first, n int) ([][]rawLease, error) {
			return s.hold(ctx, tag, workers, first, n)
		},
		func(ctx context.Context, l rawLease) error {
			tag, err := s.pool.Exec(ctx, s.q.release, l.name, s.owner, l.token)
			if err == nil && tag.RowsAffected() != 1 {
				err = fmt.Errorf("raw release %q: not held", l.name)
			}
			return err
		})
}

// forget does nothing: the raw-sql system keeps no state between batches.
func (s *rawSystem) forget() {}
