package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// ErrJobCancelled is the cause of a handler's context cancelled because
// its job was cancelled (Client.Cancel, `leasehold jobs cancel`, or with
// its batch) while it ran: test for it with
// errors.Is(context.Cause(ctx), queue.ErrJobCancelled). The job is
// cancelled in the database already; whatever the handler returns does not
// change that, and a transactional handler's transaction rolls back.
var ErrJobCancelled = errors.New("queue: job cancelled")

// runningJob is a job whose handler runs, as its grant's running set knows
// it.
type runningJob struct {
	kind   string
	since  time.Time
	r      *run
	cancel context.CancelCauseFunc
}

// runningSet is the jobs one grant runs: handlers add and remove their
// jobs (a map insert and a delete, each under the set's own mutex),
// cancel notifications look jobs up in it, and the Processor's publisher
// writes it to the running table when it changed. With the job's
// cancelable context (see jobContext), that is what a run pays for cancels
// and publishing: no allocation beyond the map's growth here, one small
// one there (BenchmarkJobContext).
type runningSet struct {
	o      partition.Ownership
	worker string

	mu      sync.Mutex
	jobs    map[int64]runningJob
	version uint64 // bumped on every change
	closed  bool   // the grant's run ended: published empty once more, then dropped

	published uint64 // the version last published (the publisher's only)
	last      string // the jobs and limited keys last published, as JSON (see round)

	// notified are jobs a cancel notification named that were not
	// running: the grant's pipeline drops those it holds before they start
	// (see pipeline.takeCancels); noted says whether there are any.
	notified map[int64]bool
	noted    atomic.Bool
	notes    atomic.Int64 // ids ever noted (for tests)

	// limited are the keys held back by limits at the pipeline's last
	// snapshot (limited.go), published with the jobs.
	limited []LimitedKey
}

// setLimited replaces the set's keys held back by limits; a change is a
// change of the set (published at the next round).
func (s *runningSet) setLimited(keys []LimitedKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.limited, keys) {
		return
	}
	s.limited = keys
	s.version++
}

// add notes that job id of kind runs under cancel since t.
func (s *runningSet) add(r *run, id int64, kind string, cancel context.CancelCauseFunc, t time.Time) {
	s.mu.Lock()
	s.jobs[id] = runningJob{kind: kind, since: t, r: r, cancel: cancel}
	s.version++
	s.mu.Unlock()
}

// addAll notes that jobs fs (a batch) run under cancel since t.
func (s *runningSet) addAll(r *run, fs []fetched, cancel context.CancelCauseFunc, t time.Time) {
	s.mu.Lock()
	for _, f := range fs {
		s.jobs[f.id] = runningJob{kind: f.kind, since: t, r: r, cancel: cancel}
	}
	s.version++
	s.mu.Unlock()
}

// remove notes that job id no longer runs.
func (s *runningSet) remove(id int64) {
	s.mu.Lock()
	delete(s.jobs, id)
	s.version++
	s.mu.Unlock()
}

// removeAll notes that jobs fs no longer run.
func (s *runningSet) removeAll(fs []fetched) {
	s.mu.Lock()
	for _, f := range fs {
		delete(s.jobs, f.id)
	}
	s.version++
	s.mu.Unlock()
}

// cancel cancels job id's handler, if it runs in s, with ErrJobCancelled;
// it reports whether it did. If it does not run and note is set, the id
// is noted for the grant's pipeline, which drops the job if it holds it.
func (s *runningSet) cancel(id int64, note bool) bool {
	s.mu.Lock()
	j, ok := s.jobs[id]
	if !ok && note && !s.closed && len(s.notified) < maxNotified {
		if s.notified == nil {
			s.notified = make(map[int64]bool)
		}
		s.notified[id] = true
		s.noted.Store(true)
		s.notes.Add(1)
	}
	s.mu.Unlock()
	if !ok {
		return false
	}
	j.r.markCancelled(id) // before the context: the run's result must see it
	j.cancel(ErrJobCancelled)
	return true
}

// maxNotified bounds the ids a running set keeps for its pipeline between
// two takes (a bulk cancel of a partition's many pending jobs, nearly all
// not held): past it, a held job cancelled may start, and is cancelled as a
// running job by the publisher's fallback.
const maxNotified = 10000

// takeNotified returns the ids noted by cancel, and forgets them.
func (s *runningSet) takeNotified() map[int64]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.notified
	s.notified = nil
	s.noted.Store(false)
	return m
}

// register starts keeping o's running set, and the member's loop (see
// member.go) if it is not running; at the first grant of o's group, the
// slot pools of its limited kinds are set up (see groupslots.go).
func (p *Processor) register(o partition.Ownership) *runningSet {
	s := &runningSet{o: o, jobs: make(map[int64]runningJob)}
	if o.Lease != nil {
		s.worker = partition.MemberOf(o.Lease.Owner())
	}
	k := wakeKey{o.Group, o.Partition}
	p.tallies.serve(o)
	p.serveSlots(o)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.grants[k] = append(p.grants[k], s)
	p.serving++
	if p.stopMember == nil {
		ctx, stop := context.WithCancel(context.Background())
		p.stopMember, p.memberDone = stop, make(chan struct{})
		p.members.Add(1)
		go p.member(ctx, p.memberDone)
	}
	return s
}

// unregister marks s closed: the member's loop publishes it empty (if it
// ever published it) and drops it. When s was the last grant of its group,
// the group's slots are given up first (their jobs' ends awaited, at
// most the slot handoff timeout). When s was the last grant served, the
// loop is stopped instead (its statement in flight cancelled), the
// outcome counts are written a last time, and unregister returns once
// they are: no goroutine of the Processor outlives
// its last Serve, and none holds a connection of the pool. The sets left
// are not cleared: readers ignore a row whose grant's lease ended.
func (p *Processor) unregister(s *runningSet) {
	s.mu.Lock()
	s.closed = true
	s.version++
	s.mu.Unlock()
	p.unserveSlots(s.o.Group) // the group's last grant: its slots are given up
	p.mu.Lock()
	p.serving--
	if p.serving > 0 {
		p.mu.Unlock()
		return
	}
	stop, done := p.stopMember, p.memberDone
	p.stopMember, p.memberDone = nil, nil
	clear(p.grants)
	p.mu.Unlock()
	stop()
	<-done
	// The last counts, now that no run is left to add to them: one
	// statement, without the prune, bounded so that a lost database does
	// not hold up the end of the run long (the counts stay for the next
	// run's publisher).
	ctx, cancel := context.WithTimeout(context.Background(), finalWriteFor)
	defer cancel()
	p.writeTallies(ctx, true)
}

// setOf returns o's running set (nil if none); for recovered runs, which
// are rare, so a lookup is fine.
func (p *Processor) setOf(o partition.Ownership) *runningSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.grants[wakeKey{o.Group, o.Partition}] {
		if s.o.Token == o.Token {
			return s
		}
	}
	return nil
}

// cancelRunning cancels the handler of job id if one of the Processor's
// grants runs it; it reports whether one did.
func (p *Processor) cancelRunning(id int64) bool {
	p.mu.Lock()
	var sets []*runningSet
	for _, ss := range p.grants {
		sets = append(sets, ss...)
	}
	p.mu.Unlock()
	done := false
	for _, s := range sets {
		if s.cancel(id, false) {
			p.log.Info("queue: running job cancelled", "group", s.o.Group, "partition", s.o.Partition,
				"token", int64(s.o.Token), "job", id)
			done = true
		}
	}
	return done
}

// cancelJobs takes in the cancel of jobs ids of partition k, notified: the
// handlers its grants run are cancelled, and the others are noted for the
// grants' pipelines, which drop those they hold before they start.
func (p *Processor) cancelJobs(k wakeKey, ids []int64) {
	p.mu.Lock()
	sets := slices.Clone(p.grants[k])
	p.mu.Unlock()
	for _, s := range sets {
		for _, id := range ids {
			if s.cancel(id, true) {
				p.log.Info("queue: running job cancelled", "group", s.o.Group, "partition", s.o.Partition,
					"token", int64(s.o.Token), "job", id)
			}
		}
	}
}

// publishedJob is one job of a published running set, as stored.
type publishedJob struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	StartedAt time.Time `json:"started_at"`
}

// publish runs one round of the publisher (see round) and drops the sets
// closed before it.
func (p *Processor) publish(ctx context.Context) {
	_, gone := p.round(ctx)
	// Sets closed before this round are dropped after one try: clearing
	// them is best effort (readers ignore a row whose grant's lease ended).
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, ss := range p.grants {
		ss = slices.DeleteFunc(ss, func(s *runningSet) bool { return slices.Contains(gone, s) })
		if len(ss) == 0 {
			delete(p.grants, k)
		} else {
			p.grants[k] = ss
		}
	}
}

// round is one round of publish: in one statement, it writes the running
// sets that changed since their last publish (their jobs, and the keys
// held back by limits of the pipeline's last snapshot) and reads which of the
// running jobs were cancelled, whose handlers it then cancels (the
// fallback of the cancel notification). Nothing changed and nothing
// running: no statement. It returns how many statements it ran (0 or 1)
// and the sets that were closed before it.
func (p *Processor) round(ctx context.Context) (statements int, gone []*runningSet) {
	p.mu.Lock()
	var sets []*runningSet
	for _, ss := range p.grants {
		sets = append(sets, ss...)
	}
	p.mu.Unlock()
	var groups, workers, jobs, limited []string
	var parts []int32
	var tokens, ids []int64
	type change struct {
		s             *runningSet
		v             uint64
		json, limited string
	}
	var changes []change
	for _, s := range sets {
		s.mu.Lock()
		if s.closed {
			gone = append(gone, s)
		} else {
			for id := range s.jobs {
				ids = append(ids, id)
			}
		}
		// A set closed before it was ever published has nothing to clear.
		if s.version != s.published && !(s.closed && s.published == 0) {
			js := make([]publishedJob, 0, len(s.jobs))
			if !s.closed {
				for id, j := range s.jobs {
					js = append(js, publishedJob{ID: id, Kind: j.kind, StartedAt: j.since})
				}
			}
			slices.SortFunc(js, func(a, b publishedJob) int { return cmp.Compare(a.ID, b.ID) })
			b, _ := json.Marshal(js) // cannot fail: ints, strings and times
			lim := []byte("[]")      // the keys held back by limits (none once closed)
			if !s.closed && len(s.limited) > 0 {
				lim, _ = json.Marshal(s.limited) // cannot fail: ints and strings
			}
			// jobs came and went, the same keys held back: the same set
			// (s.last is both, apart by a newline, which JSON never holds)
			if string(b)+"\n"+string(lim) == s.last {
				s.published = s.version
				s.mu.Unlock()
				continue
			}
			changes = append(changes, change{s, s.version, string(b), string(lim)})
		}
		s.mu.Unlock()
	}
	// One row per partition: of two grants of one partition (the old one
	// ending while the new one starts, in this process), only the newer
	// one's set is written (one statement cannot upsert a row twice); the
	// older one's is superseded.
	slices.SortFunc(changes, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.s.o.Group, b.s.o.Group), cmp.Compare(a.s.o.Partition, b.s.o.Partition),
			cmp.Compare(b.s.o.Token, a.s.o.Token))
	})
	changes = slices.CompactFunc(changes, func(a, b change) bool {
		return a.s.o.Group == b.s.o.Group && a.s.o.Partition == b.s.o.Partition
	})
	for _, c := range changes {
		groups, parts, tokens, workers, jobs = append(groups, c.s.o.Group), append(parts, int32(c.s.o.Partition)),
			append(tokens, int64(c.s.o.Token)), append(workers, c.s.worker), append(jobs, c.json)
		limited = append(limited, c.limited)
	}
	if len(changes) > 0 || len(ids) > 0 {
		statements = 1
		qctx, cancel := context.WithTimeout(ctx, max(p.cfg.PublishInterval, 5*time.Second))
		var cancelled []int64
		var written int
		err := p.pool.QueryRow(qctx, p.runq.Publish, groups, parts, tokens, workers, jobs, ids, limited).Scan(&cancelled, &written)
		cancel()
		switch err = store.Classify("queue", "publish running jobs", "", err); {
		case errors.Is(err, store.ErrClosed) || ctx.Err() != nil:
			// The pool was closed under a stopping Processor, or the
			// publisher stopped: nothing to say.
		case err != nil:
			p.fails.Fail("publish", "queue: publishing the running jobs failed", "err", err)
		default:
			p.fails.Recovered("publish", "queue: publishing the running jobs recovered")
			for _, c := range changes {
				c.s.mu.Lock()
				c.s.published, c.s.last = c.v, c.json+"\n"+c.limited
				c.s.mu.Unlock()
			}
			for _, id := range cancelled {
				p.cancelRunning(id)
			}
		}
	}
	return statements, gone
}
