package queue

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"
)

// The limits a partition's owner enforces alone (see docs/control.md): how
// many jobs of a key run at once (Policy.KeyConcurrency, Job.KeyConcurrency)
// and how often the jobs of a key and kind start (Policy.KeyRate). Every job
// of a key is in one partition and every partition has one owner, so the
// owner's count is the fleet's: no statement is spent on them. The fleet-wide
// limit of a kind (Policy.GroupConcurrency) needs the members to agree; it
// is built on leases (groupslots.go).

// keyLimit is how many jobs of f's key may run at once when f is the next
// to start: its own limit, else its kind's policy's, else 1.
func (p *Processor) keyLimit(f fetched) int {
	if f.keyLimit > 0 {
		return int(f.keyLimit)
	}
	if n := p.cfg.Workers.handlers[f.kind].opts.policy.KeyConcurrency; n > 0 {
		return n
	}
	return 1
}

// keyLimitDeclared reports whether f's key limit was declared (its own or
// its kind's policy), not the default 1.
func (p *Processor) keyLimitDeclared(f fetched) bool {
	return f.keyLimit > 0 || p.cfg.Workers.handlers[f.kind].opts.policy.KeyConcurrency > 0
}

// keyRate is the rate limit of f's key and kind (the zero Rate: none). A
// job without a key has none.
func (p *Processor) keyRate(f fetched) Rate {
	if f.key == "" {
		return Rate{}
	}
	return p.cfg.Workers.handlers[f.kind].opts.policy.KeyRate
}

// rateKey names the starts a Policy.KeyRate counts: a key's jobs of a kind.
type rateKey struct{ key, kind string }

// stamp is when a job's handler was called, set by the goroutine that
// calls it just before (in the typed wrappers of Handle, HandleTx and
// HandleTxBatch, after the middleware and the args' decoding): a start
// counts from the moment the handler runs, not from the pipeline's
// decision a little earlier, so the limit holds for what the handler sees. Zero: not called yet (the
// start counts as now).
type stamp struct{ at atomic.Int64 } // nanoseconds since monoBase, +1 (0: not yet)

// monoBase is the origin of stamps: times are kept as durations since it,
// so that they carry the monotonic clock (a step of the wall clock moves
// no start).
var monoBase = time.Now()

// store records t as the start.
func (s *stamp) store(t time.Time) { s.at.Store(int64(t.Sub(monoBase)) + 1) }

// set records now as the handler's call (nil: not rate-limited).
func (s *stamp) set() {
	if s != nil {
		s.store(time.Now())
	}
}

// settle records now as the start if the handler was never called (its
// args did not decode, its run ended before): the start still counts,
// from now, and leaves the window a period later.
func (s *stamp) settle() {
	if s != nil {
		s.at.CompareAndSwap(0, int64(time.Since(monoBase))+1)
	}
}

// time returns the start's time, now if the handler was not called yet.
func (s *stamp) time(now time.Time) time.Time {
	if n := s.at.Load(); n != 0 {
		return monoBase.Add(time.Duration(n - 1))
	}
	return now
}

// rates are the recent starts of a grant's rate-limited keys: only the
// owner starts the jobs of its partition, so its memory is the whole
// history, except for what the previous owner started (handed over when
// its run ended cleanly, see carry; else waited out, see abrupt).
type rates struct {
	starts map[rateKey][]*stamp
	// abrupt is the grant's start when the previous run ended abruptly
	// (zero: it did not, or there was none): its starts are unknown, but
	// all happened before this grant, so a rate-limited job waits until a
	// period after it, when none of them can be within the window.
	abrupt time.Time
}

// wait returns how long f must wait before it may start at now under r's
// limit (0: it may start now).
func (rs *rates) wait(f fetched, r Rate, now time.Time) time.Duration {
	if !r.limited() {
		return 0
	}
	if !rs.abrupt.IsZero() {
		if until := rs.abrupt.Add(r.Per); now.Before(until) {
			return until.Sub(now)
		}
	}
	k := rateKey{f.key, f.kind}
	if len(rs.prune(k, r, now)) < r.Starts {
		return 0 // (an upper bound of the starts in the window: at most as many)
	}
	ts := rs.window(k, r, now)
	if len(ts) < r.Starts {
		return 0
	}
	// The window holds Starts starts or more: the next may come once all
	// but Starts-1 of them have left it.
	return max(ts[len(ts)-r.Starts].Add(r.Per).Sub(now)+time.Microsecond, 0)
}

// prune drops k's oldest starts while they have left r's window at now
// and returns those left (in the order they were made): a start not yet
// stamped, or still in the window, stops it, so a few that left may stay
// behind it (counted, on the safe side, until it goes). Amortized, a
// start is looked at once: a limit that does not bind (Starts far above
// the starts of a period) costs no scan of the window at every check.
func (rs *rates) prune(k rateKey, r Rate, now time.Time) []*stamp {
	ss := rs.starts[k]
	cut := now.Add(-r.Per)
	i := 0
	for i < len(ss) && ss[i].at.Load() != 0 && !ss[i].time(now).After(cut) {
		i++
	}
	if i == 0 {
		return ss
	}
	clear(ss[:i])
	ss = ss[i:]
	if len(ss) == 0 {
		delete(rs.starts, k)
		return nil
	}
	rs.starts[k] = ss
	return ss
}

// window returns the times of k's starts in r's window at now, in time
// order (a start whose handler is not called yet counts as now). It looks
// at every start kept: only for a window that is full, or nearly.
func (rs *rates) window(k rateKey, r Rate, now time.Time) []time.Time {
	ss := rs.prune(k, r, now)
	cut := now.Add(-r.Per)
	ts := make([]time.Time, 0, len(ss))
	for _, s := range ss {
		if t := s.time(now); t.After(cut) {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// started records that f starts under r's limit and returns the stamp its
// handler's call sets (nil: no limit).
func (rs *rates) started(f fetched, r Rate) *stamp {
	if !r.limited() {
		return nil
	}
	if rs.starts == nil {
		rs.starts = make(map[rateKey][]*stamp)
	}
	k := rateKey{f.key, f.kind}
	s := &stamp{}
	rs.starts[k] = append(rs.starts[k], s)
	return s
}

// carried is the JSON form of a key's recent starts, handed from a run
// that ends cleanly to the next owner's (queue_runs.rate, migration 0018):
// the key, the kind, and each start's age in microseconds when it was
// written.
type carried struct {
	Key  string  `json:"k"`
	Kind string  `json:"t"`
	Ages []int64 `json:"a"`
}

// carry returns rs's starts still within their kind's period at now, as
// queue_runs.rate holds them (nil: none).
func (rs *rates) carry(p *Processor, now time.Time) []byte {
	var out []carried
	for k := range rs.starts {
		r := p.cfg.Workers.handlers[k.kind].opts.policy.KeyRate
		if !r.limited() {
			continue
		}
		ts := rs.window(k, r, now)
		if len(ts) == 0 {
			continue
		}
		c := carried{Key: k.key, Kind: k.kind, Ages: make([]int64, len(ts))}
		for i, t := range ts {
			c.Ages[i] = now.Sub(t).Microseconds()
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil
	}
	b, _ := json.Marshal(out) // strings and integers: cannot fail
	return b
}

// take adds the starts the previous run handed over: b as carry wrote it,
// since microseconds after it was written, read at now. Ages are counted
// from when the statements ran on the database's clock, so a start seems
// later than it was by the statements' transit: never earlier (the limit
// errs on the safe side).
func (rs *rates) take(b []byte, since int64, now time.Time) error {
	if len(b) == 0 {
		return nil
	}
	var in []carried
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if rs.starts == nil {
		rs.starts = make(map[rateKey][]*stamp)
	}
	for _, c := range in {
		k := rateKey{c.Key, c.Kind}
		for _, a := range c.Ages {
			s := &stamp{}
			s.store(now.Add(-time.Duration(a+since) * time.Microsecond))
			rs.starts[k] = append(rs.starts[k], s)
		}
	}
	return nil
}

// withSlot returns hctx, also cancelled when slot's lease ends (a nil slot:
// hctx), and its cancel.
func withSlot(hctx context.Context, slot *groupSlot) (context.Context, context.CancelFunc) {
	sctx := slot.context()
	if sctx == nil {
		return hctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(hctx)
	stop := context.AfterFunc(sctx, func() { cancel(context.Cause(sctx)) })
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// limited reports whether f's start waits on a rate (KeyRate) or a slot
// (GroupConcurrency): the recovery of an abrupt end (recover.go), which
// runs jobs one at a time outside the pipeline, leaves such jobs to it.
func (p *Processor) limited(f fetched) bool {
	pol := p.cfg.Workers.handlers[f.kind].opts.policy
	return p.keyRate(f).limited() || pol.GroupConcurrency > 0
}

// keyWeight is ProcessorConfig.KeyWeight(key), 1 if it panics (logged).
func (p *Processor) keyWeight(key string) (w int) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("queue: KeyWeight panicked; the key's weight is 1", "key", key, "panic", r)
			w = 1
		}
	}()
	return p.cfg.KeyWeight(key)
}
