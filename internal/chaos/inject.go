package chaos

import (
	"context"
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
		measuring.Go(func() {
			if sleepUntil(ctx, from) {
				in.measure(ctx, idx, from, base)
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
		err := fl.start(s)
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

// measure records the recovery time of fault i, injected at at (for a
// SkewBackward fault: when its hold began) when the
// ledger had base rows: until every partition is held by a live worker and
// the ledger has grown (or nothing is outstanding).
func (in *injector) measure(ctx context.Context, i int, at time.Time, base int64) {
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
		var kind Kind
		in.update(i, func(r *FaultRecord) { r.RecoveryMS, kind = ms, r.Kind })
		in.say("  recovered %.1fs after fault %d (%s)", float64(ms)/1000, i+1, kind)
		return
	}
}
