package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// injector carries out a fault schedule and measures recovery.
type injector struct {
	cfg     Config
	pool    *pgxpool.Pool
	env     Env
	wl      Workload
	fleet   *fleet
	cluster *pgcluster.Cluster // nil: the pg_restart fault is skipped
	say     func(format string, a ...any)
	phase   time.Time

	mu      sync.Mutex
	records []FaultRecord
	// kills are the recovery measurements of relay kills
	// (watchRelayKills).
	kills sync.WaitGroup
}

// run injects the faults of plan at their times, then waits out the rest
// of the fault phase and every recovery measurement.
func (in *injector) run(ctx context.Context, plan []Fault) {
	var measuring sync.WaitGroup
	for i, f := range plan {
		if !sleepUntil(ctx, in.phase.Add(f.At)) {
			break
		}
		if ids := in.fleet.restartExited(); len(ids) > 0 {
			in.say("workers exited on their own, started again: %v", ids)
		}
		in.mu.Lock()
		in.records = append(in.records, FaultRecord{Fault: f, RecoveryMS: -1})
		idx := len(in.records) - 1
		in.mu.Unlock()
		base, _ := in.wl.Applied(ctx, in.pool, in.env)
		at := time.Now()
		in.update(idx, func(r *FaultRecord) { r.AtMS = at.Sub(in.phase).Milliseconds() })
		if f.Kind == RestartPG && in.cluster == nil {
			in.update(idx, func(r *FaultRecord) { r.Skipped, r.Err = true, "DatabaseURL given: the server is not ours to restart" })
			in.say("fault %d/%d: %s skipped (not our server)", i+1, len(plan), f.Kind)
			continue
		}
		s := in.fleet.slots[f.Worker]
		in.fleet.mu.Lock()
		target := s.id
		in.fleet.mu.Unlock()
		if f.Kind != RestartPG {
			in.update(idx, func(r *FaultRecord) { r.Target = target })
		}
		in.say("fault %d/%d: %s", i+1, len(plan), describe(f, target))
		from := at
		if f.Kind == SkewBackward {
			from = at.Add(f.HoldAfter) // the skew alone costs nothing; the hold does
		}
		label := fmt.Sprintf("fault %d (%s)", i+1, f.Kind)
		measuring.Go(func() {
			if sleepUntil(ctx, from) {
				in.measure(ctx, idx, label, from, base)
			}
		})
		if err := in.inject(ctx, f, s); err != nil {
			in.update(idx, func(r *FaultRecord) { r.Err = err.Error() })
			in.say("fault %d/%d: %s: %v", i+1, len(plan), f.Kind, err)
		}
	}
	sleepUntil(ctx, in.phase.Add(in.cfg.Duration))
	measuring.Wait()
}

func describe(f Fault, target string) string {
	switch f.Kind {
	case RestartPG:
		return "restart PostgreSQL"
	case Pause:
		return "SIGSTOP " + target + " for " + f.For.String()
	case Kill:
		return "kill -9 " + target + ", restart after " + f.For.String()
	case Hold:
		return "hold " + target + "'s connection for " + f.For.String()
	case Latency:
		return "add " + f.Latency.String() + " latency to " + target + " for " + f.For.String()
	case SkewForward:
		return "skew " + target + "'s clock by +" + f.Skew.String() + " for " + f.For.String()
	case SkewBackward:
		return "skew " + target + "'s clock by " + f.Skew.String() + " for " + f.For.String() +
			", holding its connection for " + f.HoldFor.String() + " after " + f.HoldAfter.String()
	}
	return string(f.Kind)
}

func (in *injector) update(i int, f func(*FaultRecord)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f(&in.records[i])
}

// sleepUntil waits until t, or until ctx is done (false).
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// sleepFor waits d, or until ctx is done (false).
func sleepFor(ctx context.Context, d time.Duration) bool {
	return sleepUntil(ctx, time.Now().Add(d))
}

// inject applies f to s and heals it after its duration.
func (in *injector) inject(ctx context.Context, f Fault, s *slot) error {
	fl := in.fleet
	switch f.Kind {
	case Pause:
		fl.setDown(s, Pause)
		if err := fl.signal(s, syscall.SIGSTOP); err != nil {
			fl.setDown(s, "")
			return err
		}
		sleepFor(ctx, f.For)
		err := fl.signal(s, syscall.SIGCONT)
		fl.setDown(s, "")
		return err
	case Kill:
		fl.setDown(s, Kill)
		if err := fl.signal(s, syscall.SIGKILL); err != nil {
			fl.setDown(s, "")
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = waitExit(wctx, s)
		cancel()
		sleepFor(ctx, f.For)
		fl.startMu.Lock()
		err := fl.start(s)
		fl.startMu.Unlock()
		fl.setDown(s, "")
		return err
	case Hold:
		fl.setDown(s, Hold)
		s.proxy.Blackhole()
		sleepFor(ctx, f.For)
		s.proxy.Heal()
		fl.setDown(s, "")
	case Latency:
		s.proxy.SetLatency(f.Latency)
		sleepFor(ctx, f.For)
		s.proxy.SetLatency(0)
	case SkewForward:
		if err := writeSkew(s.skewFile, f.Skew); err != nil {
			return err
		}
		sleepFor(ctx, f.For)
		return writeSkew(s.skewFile, 0)
	case SkewBackward:
		if err := writeSkew(s.skewFile, f.Skew); err != nil {
			return err
		}
		start := time.Now()
		sleepFor(ctx, f.HoldAfter)
		fl.setDown(s, SkewBackward)
		s.proxy.Blackhole()
		sleepFor(ctx, f.HoldFor)
		s.proxy.Heal()
		fl.setDown(s, "")
		sleepUntil(ctx, start.Add(f.For))
		return writeSkew(s.skewFile, 0)
	case RestartPG:
		rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		return in.cluster.Restart(rctx)
	}
	return nil
}

// watchRelayKills starts again, at once, each worker that killed itself
// right after a relay's Kafka commit (fleet.relayKills), records it as a
// fault of kind RelayKill, and measures the recovery from it, bounded by
// measureCtx, until ctx ends. in.kills waits for the measurements.
func (in *injector) watchRelayKills(ctx, measureCtx context.Context) {
	for {
		var k relayKill
		select {
		case <-ctx.Done():
			return
		case k = <-in.fleet.relayKills:
		}
		base, _ := in.wl.Applied(measureCtx, in.pool, in.env)
		in.mu.Lock()
		at := k.at.Sub(in.phase)
		in.records = append(in.records, FaultRecord{Fault: Fault{Kind: RelayKill, At: at.Round(time.Millisecond), Worker: k.slot.index},
			AtMS: at.Milliseconds(), Target: k.id, RecoveryMS: -1})
		idx := len(in.records) - 1
		in.mu.Unlock()
		started, err := in.fleet.restartIfExited(k.slot, k.exited)
		switch {
		case err != nil:
			in.update(idx, func(r *FaultRecord) { r.Err = err.Error() })
			in.say("%s killed itself right after a relay's Kafka commit; starting it again failed: %v", k.id, err)
		case started:
			in.say("%s killed itself right after a relay's Kafka commit; started again", k.id)
		default:
			in.say("%s killed itself right after a relay's Kafka commit", k.id)
		}
		label := "relay kill of " + k.id
		in.kills.Go(func() { in.measure(measureCtx, idx, label, k.at, base) })
	}
}

// watchRelayPauses resumes each worker that stopped itself in a relay's
// transaction (it wrote its slot's pause file, then sent itself SIGSTOP)
// after the time it asked for, records it as a fault of kind RelayPause,
// and measures the recovery from it, bounded by measureCtx; it polls the
// pause files until ctx ends, then waits for the pauses in progress.
// in.kills waits for the measurements.
func (in *injector) watchRelayPauses(ctx, measureCtx context.Context) {
	var pausing sync.WaitGroup
	defer pausing.Wait()
	busy := map[int]bool{}
	var mu sync.Mutex
	for sleepFor(ctx, skewPoll) {
		for _, s := range in.fleet.slots {
			mu.Lock()
			skip := busy[s.index]
			mu.Unlock()
			if skip {
				continue
			}
			b, err := os.ReadFile(s.pauseFile)
			if err != nil {
				continue
			}
			ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				continue // being written
			}
			mu.Lock()
			busy[s.index] = true
			mu.Unlock()
			pausing.Go(func() {
				defer func() {
					mu.Lock()
					delete(busy, s.index)
					mu.Unlock()
				}()
				in.relayPaused(measureCtx, s, time.Duration(ms)*time.Millisecond)
			})
		}
	}
}

// relayPaused handles a relay pause of s's worker, stopped for d.
func (in *injector) relayPaused(ctx context.Context, s *slot, d time.Duration) {
	at := time.Now()
	base, _ := in.wl.Applied(ctx, in.pool, in.env)
	in.fleet.mu.Lock()
	id := s.id
	in.fleet.mu.Unlock()
	in.mu.Lock()
	off := at.Sub(in.phase)
	in.records = append(in.records, FaultRecord{Fault: Fault{Kind: RelayPause, At: off.Round(time.Millisecond), Worker: s.index, For: d},
		AtMS: off.Milliseconds(), Target: id, RecoveryMS: -1})
	idx := len(in.records) - 1
	in.mu.Unlock()
	in.say("%s stopped itself just before a relay's Kafka commit; SIGCONT after %v", id, d)
	marked := in.fleet.swapDown(s, "", RelayPause)
	label := "relay pause of " + id
	in.kills.Go(func() { in.measure(ctx, idx, label, at, base) })
	sleepFor(ctx, d)
	// The file first: once resumed, the worker may ask for its next pause.
	_ = os.Remove(s.pauseFile)
	if err := in.fleet.signal(s, syscall.SIGCONT); err != nil {
		in.update(idx, func(r *FaultRecord) { r.Err = err.Error() })
	}
	if marked {
		in.fleet.swapDown(s, RelayPause, "")
	}
}

// measure records the recovery time of fault i (label names it), injected
// at at (for a SkewBackward fault: when its hold began) when the
// ledger had base rows: until every partition is held by a live worker and
// the ledger has grown (or nothing is outstanding).
func (in *injector) measure(ctx context.Context, i int, label string, at time.Time, base int64) {
	for time.Since(at) < RecoveryLimit {
		if !sleepFor(ctx, 50*time.Millisecond) {
			return
		}
		if ok, _ := allHeld(ctx, in.pool, in.env, in.fleet.live(), at, in.cfg.TTL); !ok {
			continue
		}
		n, err := in.wl.Applied(ctx, in.pool, in.env)
		if err != nil {
			continue
		}
		if n <= base {
			if out, err := in.wl.Outstanding(ctx, in.pool, in.env); err != nil || out > 0 {
				continue
			}
		}
		ms := time.Since(at).Milliseconds()
		in.update(i, func(r *FaultRecord) { r.RecoveryMS = ms })
		in.say("  recovered %.1fs after %s", float64(ms)/1000, label)
		return
	}
}
