package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// waiting is a key whose next job is not due: the fetch's report that the
// key's later jobs wait behind job id for wait.
type waiting struct {
	key  string
	id   int64
	wait time.Duration
}

// fetchResult is what one fetch found.
type fetchResult struct {
	jobs    []fetched // in (priority, run_at, id) order
	waiting []waiting
	// scanned is how many due jobs the fetch looked at: less than it was
	// asked to, and the partition has no more due jobs it could see.
	scanned int
	// walking reports, with kinds paused, that a level's walk stopped at
	// its cap (queueFetchWalk): more due jobs may lie past it.
	walking bool
}

// pausedWalk is how many rows of each priority level a fetch walks, per
// job it asks for, while kinds of the group are paused (see
// queueFetchWalk): the paused kinds' rows are walked past, at most this
// many times the fetch's size per level per fetch.
const pausedWalk = 8

// walkPos is where a fetch's walk of each priority level resumes while
// kinds are paused (see queueFetchWalk); the zero value starts every
// level from its beginning.
type walkPos struct {
	at  [4]*time.Time
	id  [4]*int64
	gen uint64 // the pauses' generation the positions were taken under
	// keep: a level's walk that reached its end stays there instead of
	// starting again from the beginning (full keys are walked past: their
	// rows are read by key, see fairTurns).
	keep bool
}

// fairWalk is how many rows of each priority level a fetch walks, per job
// it asks for, while keys fill their share of the window (see
// queueFetchWalk): their rows are walked past once, not at every fetch.
const fairWalk = 32

// fairAsk is what a fetch asks for while keys of the partition fill their
// share of the window (see fairTurns): the keys walked past (full), and
// the keys whose next jobs are read by key, with how many.
type fairAsk struct {
	full   []string
	refill []string
	counts []int32
	walk   int // the rows each level's walk may pass
}

// fetch reads up to n due jobs of o's partition (see queueFetch in
// internal/store), leaving out the jobs in flight, the keys in skip and the
// paused kinds.
func (p *Processor) fetch(ctx context.Context, o partition.Ownership, n int, inFlight []int64, skip []string) (res fetchResult, err error) {
	return p.fetchFrom(ctx, o, n, inFlight, skip, nil, nil)
}

// fetchFrom is fetch. With no kind of the group paused, the member's
// fetcher reads it together with the other partitions' fetches asked for
// meanwhile (see fetcher); with kinds paused or keys full (fair not nil),
// each level's walk resumes at pos (nil: from the beginning) and is capped
// (see queueFetchWalk), and pos is moved on.
func (p *Processor) fetchFrom(ctx context.Context, o partition.Ownership, n int, inFlight []int64, skip []string, pos *walkPos, fair *fairAsk) (res fetchResult, err error) {
	if p.trace.tracer != nil {
		defer p.trace.fetched(ctx, time.Now(), o, n, &res, &err)
	}
	ps := p.pauses.of(o.Group)
	paused := ps != nil && len(ps.kinds) > 0
	if !paused && fair == nil {
		return p.fetcher.fetch(ctx, fetchAsk{group: o.Group, part: o.Partition, n: n, held: inFlight, skip: skip})
	}
	if pos == nil {
		pos = &walkPos{}
	}
	if g := p.pauses.gen.Load(); pos.gen != g {
		*pos = walkPos{gen: g, keep: pos.keep} // other kinds paused or resumed: walk from the beginning
	}
	kinds, walk := []string{}, pausedWalk*n
	if paused {
		kinds = ps.kinds
	}
	if fair == nil {
		fair = &fairAsk{full: []string{}, refill: []string{}, counts: []int32{}} // not NULL arrays
	} else {
		walk = max(fair.walk, pausedWalk)
	}
	pos.keep = len(fair.full) > 0
	a := fetchAsk{group: o.Group, part: o.Partition, n: n, held: inFlight, skip: skip}
	var args fetchArgs
	args.add(a)
	err = p.readFetch(ctx, p.q.FetchWalk, []any{o.Group, args.parts, args.n, args.held, args.heldIn, args.skip, args.skipIn,
		kinds, walk, pos.at[:], pos.id[:], fair.full, fair.refill, fair.counts}, pos, func(int) *fetchResult { return &res })
	return res, err
}

// fetchArgs are the arrays of queueFetch's arguments for many partitions.
type fetchArgs struct {
	parts, n       []int32
	held           []int64
	heldIn, skipIn []int32
	skip           []string
}

func (fa *fetchArgs) add(a fetchAsk) {
	fa.parts, fa.n = append(fa.parts, int32(a.part)), append(fa.n, int32(a.n))
	fa.held = append(fa.held, a.held...)
	for range a.held {
		fa.heldIn = append(fa.heldIn, int32(a.part))
	}
	fa.skip = append(fa.skip, a.skip...)
	for range a.skip {
		fa.skipIn = append(fa.skipIn, int32(a.part))
	}
}

// readFetch runs a fetch statement in one round trip and hands each row to
// the result of its partition (into). The statement runs in a read-only
// transaction without JIT, pipelined with its BEGIN, SET and COMMIT:
// statistics that no longer fit the table (say from a backlog of one key,
// kept after it was gone) can make the planner estimate the per-key probes
// at many rows each, and the estimate past jit_above_cost makes every fetch
// compile the plan: measured at 770 ms a fetch instead of 3.6 ms. pos
// takes the walk positions of queueFetchWalk (nil for queueFetch).
func (p *Processor) readFetch(ctx context.Context, stmt string, args []any, pos *walkPos, into func(part int) *fetchResult) error {
	b := &pgx.Batch{}
	var q *pgx.QueuedQuery
	genericFetch(b, func() { q = b.Queue(stmt, args...) })
	// Every column a job row has is NOT NULL in the other rows too (kind ''
	// for a key's wait or a level's walk position), so that it is scanned
	// into a value, not a pointer allocated for each row; wait is set only
	// in a key's wait row.
	var f fetched
	var kind string
	var attempt, max int
	var created time.Time
	var holds, maxSet bool
	var wait *int64
	var scanned int
	var runAt time.Time
	var batch *int64
	var item *string
	var prio int16
	var part int32
	q.Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&f.id, &f.key, &kind, &f.args, &attempt, &max, &created, &holds, &wait, &scanned, &runAt, &batch, &item,
			&prio, &maxSet, &f.trace, &part, &f.keyLimit}, func() error {
			res := into(int(part))
			if res == nil {
				return nil // not asked for (cannot happen)
			}
			res.scanned = scanned
			if kind == "" && wait == nil { // a level's walk position (queueFetchWalk)
				l := prio - 1
				switch {
				case holds && pos.keep && f.id > 0: // walked to its end: stays there
					at, id := runAt, f.id
					pos.at[l], pos.id[l] = &at, &id
				case holds && pos.keep: // nothing walked: the position stays
				case holds:
					pos.at[l], pos.id[l] = nil, nil
				case f.id == 0: // the first row walked could not be taken: the position stays
				default:
					at, id := runAt, f.id
					pos.at[l], pos.id[l] = &at, &id
					res.walking = true
				}
				return nil
			}
			if kind == "" {
				res.waiting = append(res.waiting, waiting{key: f.key, id: f.id, wait: time.Duration(*wait) * time.Microsecond})
				return nil
			}
			j := f
			j.kind, j.attempt, j.max, j.created, j.holds, j.maxSet = kind, attempt, max, created, holds, maxSet
			j.batch, j.item = 0, ""
			if batch != nil {
				j.batch = *batch
			}
			if item != nil {
				j.item = *item
			}
			j.max = p.cfg.Workers.maxAttempts(j.kind, j.max, j.maxSet)
			res.jobs = append(res.jobs, j)
			f.args, f.trace = nil, nil // ForEachRow scans into the same variables: do not share them
			return nil
		})
		return err
	})
	return p.pool.SendBatch(ctx, b).Close()
}

// memberTx queues, in b, what queue queues between a BEGIN (READ ONLY
// when readOnly), store.MemberSettings and a COMMIT: one transaction
// without JIT and without sequential scans of the jobs (see
// store.MemberSettings), sent in the batch's one round trip. The member's
// statements that probe many partitions (the poll, retention) run so.
func memberTx(b *pgx.Batch, readOnly bool, queue func()) {
	inTx(b, readOnly, store.MemberSettings, queue)
}

// genericFetch is memberTx for the fetch and poll statements, which also
// run on their prepared statement's generic plan (store.FetchSettings).
// (The poll's and its read of the pauses were planned at every call too:
// 0.24 ms a poll at 64 x 1024.)
// PostgreSQL otherwise plans a fetch at every call: its generic plan's
// estimate (arrays of unknown length) never beats the custom plans', so it
// keeps making custom ones, and planning the statement cost several times
// running it (bench fleet, 4 x 64 at 500 jobs/s: 0.70 ms of planning per
// fetch, 0.09 ms of execution; the planning was a third of the server's
// CPU per job). Every step of the statements names its index (see
// queueFetch), so the generic plan is the custom one
// (TestFetchCostDoesNotGrowWithKeyBacklog, TestMemberPlansOnAnEmptyTable).
func genericFetch(b *pgx.Batch, queue func()) {
	inTx(b, true, store.FetchSettings, queue)
}

func inTx(b *pgx.Batch, readOnly bool, settings string, queue func()) {
	if readOnly {
		b.Queue("BEGIN READ ONLY")
	} else {
		b.Queue("BEGIN")
	}
	b.Queue(settings)
	queue()
	b.Queue("COMMIT")
}
