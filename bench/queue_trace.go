package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Both systems of the queue suite are timed by the same pgx tracer on their
// pools, so neither is measured differently from the other: a job counts as
// finished when the transaction whose complete statement changed it has
// committed, and its latency is from the start of the fetch that returned it
// until that commit.

// burn is one burndown being measured: the partitions' slots and the count
// of finished jobs.
type burn struct {
	want  int64 // jobs in the backlog
	slots []*slot
	start time.Time

	done     atomic.Int64 // jobs finished so far
	stopped  atomic.Bool  // the measurement is over: count nothing more
	finished chan struct{}
	once     sync.Once
	end      time.Time // when the last job finished; written before finished closes
}

func newBurn(want, partitions int) *burn {
	b := &burn{want: int64(want), finished: make(chan struct{})}
	for range partitions {
		b.slots = append(b.slots, &slot{b: b})
	}
	return b
}

// finish records that n more jobs finished at now.
func (b *burn) finish(n int64, now time.Time) {
	if b.done.Add(n) >= b.want {
		b.once.Do(func() {
			b.end = now
			close(b.finished)
		})
	}
}

// latencies returns every slot's latencies, sorted; call it once the
// partitions' goroutines have ended.
func (b *burn) latencies() []time.Duration {
	var all []time.Duration
	for _, s := range b.slots {
		all = append(all, s.lat...)
	}
	slices.Sort(all)
	return all
}

// stmtKind classifies the statements the tracer follows.
type stmtKind uint8

const (
	stmtOther stmtKind = iota
	stmtFetch
	stmtComplete
	stmtCompleteFenced
	stmtCommit
	stmtRollback
)

// slot is one partition's view of a burndown. The statements of one
// partition run one after another on one goroutine (the Processor's Run, or
// the raw-sql loop), so a slot needs no lock.
type slot struct {
	b          *burn
	cur        stmtKind  // the statement in flight
	fetchStart time.Time // start of the latest fetch
	changed    int64     // jobs the complete statements of the open transaction changed
	fencedN    int64     // jobs the fenced complete statement in flight is to change
	lat        []time.Duration
}

type slotKey struct{}

// withSlot returns ctx carrying s: the tracer follows statements sent with it.
func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// jobTracer is the pgx tracer of both systems' pools. Statements whose
// context carries no slot (membership, leases, set-up) are ignored.
type jobTracer struct {
	fetch, complete, completeFenced string
}

// TraceQueryStart notes which statement a slot's partition sends, and when
// its fetches start.
func (t jobTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil {
		return ctx
	}
	switch data.SQL {
	case t.fetch:
		s.cur = stmtFetch
		s.fetchStart = time.Now()
	case t.complete:
		s.cur = stmtComplete
	case t.completeFenced:
		// Its result row (jobs changed) is not visible to a tracer: count the
		// ids it was given. The suite verifies afterwards that every job
		// completed exactly once.
		s.cur = stmtCompleteFenced
		s.fencedN = 0
		if len(data.Args) > 0 {
			if ids, ok := data.Args[0].([]int64); ok {
				s.fencedN = int64(len(ids))
			}
		}
	case "commit":
		s.cur = stmtCommit
	case "rollback":
		s.cur = stmtRollback
	default:
		s.cur = stmtOther
	}
	return ctx
}

// TraceQueryEnd counts the jobs a complete statement changed, and credits
// them when their transaction commits.
func (t jobTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	s, _ := ctx.Value(slotKey{}).(*slot)
	if s == nil {
		return
	}
	autocommit := conn.PgConn().TxStatus() == 'I' // the statement was its own transaction
	switch s.cur {
	case stmtComplete:
		if data.Err == nil {
			s.changed += data.CommandTag.RowsAffected()
			if autocommit {
				s.credit()
			}
		}
	case stmtCompleteFenced:
		if data.Err == nil {
			s.changed += s.fencedN
			if autocommit {
				s.credit()
			}
		}
	case stmtCommit:
		if data.Err != nil || data.CommandTag.String() != "COMMIT" {
			s.changed = 0
			break
		}
		s.credit()
	case stmtRollback:
		s.changed = 0
	}
	s.cur = stmtOther
}

// credit counts the jobs changed by the transaction that just committed as
// finished now.
func (s *slot) credit() {
	n := s.changed
	s.changed = 0
	if n == 0 || s.b.stopped.Load() {
		return
	}
	now := time.Now()
	d := now.Sub(s.fetchStart)
	for range n {
		s.lat = append(s.lat, d)
	}
	s.b.finish(n, now)
}
