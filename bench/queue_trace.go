package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/partition"
)

// leasehold and raw-sql are timed by one pgx tracer on their pools, so
// neither is measured differently from the other: a job counts as finished
// when the transaction whose complete statement changed it has committed.
// Its latency is from the start of the fetch that returned it until that
// commit, matching a partition's completed jobs to its fetches in order
// (exact while a partition completes its jobs in the order it fetched
// them).
//
// The tracer finds a statement's partition from the statement itself (the
// fetch's partition parameter, the fenced completion's lease name) or, for
// the raw-sql loops, from the slot their context carries; it keeps a
// transaction's state per connection. So it counts alike whichever
// goroutine and context the library sends a statement from.

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

	// track makes the burn keep every completed job's id and time (the hol
	// case); set it before the measurement starts.
	track bool
	mu    sync.Mutex
	ids   []completion
}

// completion is a job observed completed: its id and when.
type completion struct {
	id int64
	at time.Time
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

// completed notes, when the burn tracks ids, that jobs ids completed at
// now. Call it before finish, so that the ids are in when the burn ends.
func (b *burn) completed(ids []int64, now time.Time) {
	if !b.track || b.stopped.Load() {
		return
	}
	b.mu.Lock()
	for _, id := range ids {
		b.ids = append(b.ids, completion{id, now})
	}
	b.mu.Unlock()
}

// completions returns the completions noted so far.
func (b *burn) completions() []completion {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ids)
}

// latencies returns every slot's latencies, sorted; call it once the
// measurement has stopped.
func (b *burn) latencies() []time.Duration {
	var all []time.Duration
	for _, s := range b.slots {
		s.mu.Lock()
		all = append(all, s.lat...)
		s.mu.Unlock()
	}
	slices.Sort(all)
	return all
}

// slot is one partition's view of a burndown.
type slot struct {
	b       *burn
	mu      sync.Mutex
	fetches []fetchMark // fetches whose jobs are not all credited yet, oldest first
	last    time.Time   // start of the latest fetch
	lat     []time.Duration
}

// fetchMark is a fetch's start and how many of its rows are not credited.
type fetchMark struct {
	start time.Time
	left  int64
}

type slotKey struct{}

// withSlot returns ctx carrying s: the raw-sql loops' statements name their
// partition so.
func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// stmtKind classifies the statements the tracer follows.
type stmtKind uint8

const (
	stmtFetch stmtKind = iota
	stmtComplete
	stmtCompleteFenced
	stmtCommit
	stmtRollback
)

// stmt is one traced statement in flight, carried by the context pgx hands
// from TraceQueryStart to TraceQueryEnd.
// walkPositionRows is how many rows of queueFetchWalk's are walk
// positions, not jobs: one per priority level.
const walkPositionRows = 4

type stmt struct {
	kind  stmtKind
	slot  *slot
	start time.Time
	walk  bool    // a fetch statement that walks (queueFetchWalk)
	ids   []int64 // complete statements: the jobs given
	// parts are, for a complete statement of several partitions (the
	// member's completer), the jobs given of each slot; nil otherwise.
	parts map[*slot][]int64
}

type stmtKey struct{}

// pendingTx is what the complete statements of a connection's open
// transaction changed, credited when it commits.
type pendingTx struct {
	slot    *slot
	changed int64
	ids     []int64
}

// jobTracer is the pgx tracer of leasehold's and raw-sql's pools. It counts
// for the burn set with follow; statements other than the fetch, the
// complete statements and the end of their transactions are ignored.
type jobTracer struct {
	fetch, fetchWalk, complete, completeFenced string
	leases                                     map[string]int // partition lease name -> partition

	cur  atomic.Pointer[burn]
	mu   sync.Mutex
	open map[*pgx.Conn]*pendingTx
}

func newJobTracer(sql queueSQL, partitions int) *jobTracer {
	t := &jobTracer{fetch: sql.fetch, fetchWalk: sql.fetchWalk, complete: sql.complete, completeFenced: sql.completeFenced,
		leases: map[string]int{}, open: map[*pgx.Conn]*pendingTx{}}
	for p := range partitions {
		t.leases[partition.LeaseName(queueGroup, p)] = p
	}
	return t
}

// follow makes the tracer count for b (nil: for none).
func (t *jobTracer) follow(b *burn) {
	t.cur.Store(b)
	t.mu.Lock()
	clear(t.open)
	t.mu.Unlock()
}

// slotOf returns the slot of the statement's partition: from ctx (raw-sql),
// else from the partition argument at index pi or the lease name at index
// li (-1: none).
func (t *jobTracer) slotOf(ctx context.Context, b *burn, args []any, pi, li int) *slot {
	if s, _ := ctx.Value(slotKey{}).(*slot); s != nil && s.b == b {
		return s
	}
	p := -1
	if pi >= 0 && pi < len(args) {
		switch v := args[pi].(type) {
		case int:
			p = v
		case int32:
			p = int(v)
		case []int32: // the fetch of one partition
			if len(v) == 1 {
				p = int(v[0])
			}
		case int64:
			p = int(v)
		}
	}
	if li >= 0 && li < len(args) {
		if name, ok := args[li].(string); ok {
			if q, ok := t.leases[name]; ok {
				p = q
			}
		}
	}
	if p < 0 || p >= len(b.slots) {
		return nil
	}
	return b.slots[p]
}

// TraceQueryStart notes which statement is sent, for which partition.
func (t *jobTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	b := t.cur.Load()
	if b == nil {
		return ctx
	}
	st := t.classify(ctx, b, data.SQL, data.Args)
	if st == nil {
		return ctx
	}
	return context.WithValue(ctx, stmtKey{}, st)
}

// classify returns what statement sql with args is, for which partition;
// nil for one the tracer ignores.
func (t *jobTracer) classify(ctx context.Context, b *burn, sql string, args []any) *stmt {
	st := &stmt{}
	switch sql {
	case t.fetch, t.fetchWalk:
		st.kind, st.start, st.walk = stmtFetch, time.Now(), sql == t.fetchWalk
		st.slot = t.slotOf(ctx, b, args, 1, -1) // $1 group, $2 partitions
	case t.complete, t.completeFenced:
		// $1 the jobs' ids; $7 the lease name of each (the fenced
		// statement's; the raw loop's statement names its slot in ctx).
		st.kind = stmtComplete
		if sql == t.completeFenced {
			st.kind = stmtCompleteFenced
		}
		if len(args) > 0 {
			st.ids, _ = args[0].([]int64)
		}
		st.slot = t.slotOf(ctx, b, args, -1, -1)
		if st.slot == nil && len(args) > 6 {
			leases, _ := args[6].([]string)
			for i, name := range leases {
				if s := t.slotOfLease(b, name); s != nil && i < len(st.ids) {
					if st.parts == nil {
						st.parts = map[*slot][]int64{}
					}
					st.parts[s] = append(st.parts[s], st.ids[i])
				}
			}
			for s := range st.parts {
				st.slot = s // any: a transaction's statements are of one grant
				break
			}
		}
	case "commit", "COMMIT":
		st.kind = stmtCommit
	case "rollback", "ROLLBACK":
		st.kind = stmtRollback
	default:
		return nil
	}
	return st
}

// TraceQueryEnd notes a fetch's rows, counts the jobs a complete statement
// changed and credits them when their transaction commits.
func (t *jobTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	st, _ := ctx.Value(stmtKey{}).(*stmt)
	if st == nil {
		return
	}
	t.ended(conn, st, data, false)
}

// ended is TraceQueryEnd for st; inBatch says it was read from a batch, in
// which the connection's transaction status is known only at its end: a
// complete statement there is taken for one inside a transaction, the
// batch's (the completer pipelines its BEGIN, the statement and COMMIT).
func (t *jobTracer) ended(conn *pgx.Conn, st *stmt, data pgx.TraceQueryEndData, inBatch bool) {
	switch st.kind {
	case stmtFetch:
		if st.slot != nil && data.Err == nil {
			n := data.CommandTag.RowsAffected()
			if st.walk {
				n -= walkPositionRows // not jobs
			}
			st.slot.fetched(st.start, n)
		}
	case stmtComplete, stmtCompleteFenced:
		if data.Err != nil || st.slot == nil {
			return
		}
		// The fenced statement's result row (jobs changed) is not visible to
		// a tracer: it counts the ids it was given. The suite verifies
		// afterwards that every job completed exactly once.
		n := int64(len(st.ids))
		if st.kind == stmtComplete {
			n = data.CommandTag.RowsAffected()
		}
		if !inBatch && conn.PgConn().TxStatus() == 'I' { // the statement was its own transaction
			if st.parts != nil {
				for s, ids := range st.parts {
					s.credit(int64(len(ids)), ids)
				}
				return
			}
			st.slot.credit(n, st.ids)
			return
		}
		t.mu.Lock()
		p := t.open[conn]
		if p == nil {
			p = &pendingTx{slot: st.slot}
			t.open[conn] = p
		}
		p.changed += n
		if st.slot.b.track {
			p.ids = append(p.ids, st.ids...)
		}
		t.mu.Unlock()
	case stmtCommit, stmtRollback:
		t.mu.Lock()
		p := t.open[conn]
		delete(t.open, conn)
		t.mu.Unlock()
		if p != nil && st.kind == stmtCommit && data.Err == nil && data.CommandTag.String() == "COMMIT" {
			p.slot.credit(p.changed, p.ids)
		}
	}
}

// fetched notes a fetch that started at start and returned rows rows.
func (s *slot) fetched(start time.Time, rows int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = start
	if rows > 0 {
		s.fetches = append(s.fetches, fetchMark{start, rows})
	}
}

// credit counts n jobs (ids, when tracked) as finished now, each with the
// time since the start of the oldest fetch whose rows are not all
// credited yet.
func (s *slot) credit(n int64, ids []int64) {
	b := s.b
	if n <= 0 || b.stopped.Load() {
		return
	}
	now := time.Now()
	s.mu.Lock()
	for range n {
		start := s.last
		if len(s.fetches) > 0 {
			start = s.fetches[0].start
			if s.fetches[0].left--; s.fetches[0].left == 0 {
				s.fetches = s.fetches[1:]
			}
		}
		s.lat = append(s.lat, now.Sub(start))
	}
	s.mu.Unlock()
	b.completed(ids, now)
	b.finish(n, now)
}

// slotOfLease returns the slot of the partition whose lease is name, nil
// if none.
func (t *jobTracer) slotOfLease(b *burn, name string) *slot {
	if p, ok := t.leases[name]; ok && p < len(b.slots) {
		return b.slots[p]
	}
	return nil
}

// batchStart is the start of a traced batch, carried by its context.
type batchStart struct{ at time.Time }

// TraceBatchStart notes when a batch (the member's pipelined fetch) was
// sent.
func (t *jobTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchStart{}, time.Now())
}

// TraceBatchQuery notes a pipelined fetch's rows. The member's fetch reads
// several partitions ($2) at once, and a tracer sees only its row count:
// the rows are shared evenly among its partitions (each gets at least one
// while any are left), so a job's latency is counted from the start of a
// fetch of its partition that returned rows.
func (t *jobTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	b := t.cur.Load()
	if b == nil {
		return
	}
	if data.SQL != t.fetch {
		// A completion pipelined with its BEGIN and COMMIT, counted as
		// one in a transaction.
		if st := t.classify(ctx, b, data.SQL, data.Args); st != nil {
			t.ended(conn, st, pgx.TraceQueryEndData{CommandTag: data.CommandTag, Err: data.Err}, true)
		}
		return
	}
	if data.Err != nil || len(data.Args) < 2 {
		return
	}
	start, _ := ctx.Value(batchStart{}).(time.Time)
	parts, _ := data.Args[1].([]int32)
	rows := data.CommandTag.RowsAffected()
	for i, p := range parts {
		if int(p) < 0 || int(p) >= len(b.slots) {
			continue
		}
		share := rows / int64(len(parts))
		if int64(i) < rows%int64(len(parts)) {
			share++
		}
		b.slots[p].fetched(start, share)
	}
}

// TraceBatchEnd does nothing: the batch's queries were noted one by one.
func (t *jobTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
