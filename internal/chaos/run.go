package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/netproxy"
	"github.com/leasehold/leasehold/internal/pgbouncer"
	"github.com/leasehold/leasehold/partition"
)

// Report is the outcome of a run: the checker's Result and the
// orchestrator's measurements.
type Report struct {
	Result
	Workload   string  `json:"workload"`
	Seed       int64   `json:"seed"`
	Unfenced   bool    `json:"unfenced"`
	PgBouncer  bool    `json:"pgbouncer"`
	Workers    int     `json:"workers"`
	Partitions int     `json:"partitions"`
	TTLMS      int64   `json:"ttl_ms"`
	DurationS  float64 `json:"duration_s"`
	// RecoveryP50MS, RecoveryP99MS and RecoveryMaxMS summarise the time
	// from each fault's injection until every partition was held by a live
	// worker and the ledger grew again (or no job was outstanding).
	RecoveryP50MS int64 `json:"recovery_p50_ms"`
	RecoveryP99MS int64 `json:"recovery_p99_ms"`
	RecoveryMaxMS int64 `json:"recovery_max_ms"`
	// Unrecovered counts faults after which the fleet did not recover
	// within RecoveryLimit.
	Unrecovered int `json:"unrecovered"`
	// ThroughputPerS is the ledger rows applied per second of the fault
	// phase.
	ThroughputPerS float64 `json:"throughput_per_s"`
	// Faults summarises the faults by kind.
	Faults map[Kind]*FaultStats `json:"faults"`
	// FaultLog lists every fault as injected.
	FaultLog []FaultRecord `json:"fault_log"`
	// WorkerExits counts worker processes that exited on their own (they
	// are started again).
	WorkerExits int `json:"worker_exits"`
	// TornLines counts history lines torn by kill -9 (skipped).
	TornLines int `json:"torn_history_lines"`
	// Dir is where the histories and worker logs were kept, if they were.
	Dir string `json:"dir,omitempty"`
}

// FaultStats summarises the faults of one kind.
type FaultStats struct {
	Injected      int   `json:"injected"`
	Skipped       int   `json:"skipped"`
	Unrecovered   int   `json:"unrecovered"`
	RecoveryP50MS int64 `json:"recovery_p50_ms"`
	RecoveryP99MS int64 `json:"recovery_p99_ms"`
	RecoveryMaxMS int64 `json:"recovery_max_ms"`
}

// FaultRecord is one fault as it happened.
type FaultRecord struct {
	Fault
	// AtMS is when it was injected, from the start of the fault phase.
	AtMS int64 `json:"at_ms"`
	// Target is the worker's member id at injection.
	Target string `json:"target,omitempty"`
	// RecoveryMS is the recovery time; -1 if the fleet did not recover.
	RecoveryMS int64  `json:"recovery_ms"`
	Skipped    bool   `json:"skipped,omitempty"`
	Err        string `json:"err,omitempty"`
}

// RecoveryLimit bounds the wait for recovery after a fault.
const RecoveryLimit = 60 * time.Second

const group = "chaos"

// Run runs the fleet under the scheduled faults and checks the outcome. An
// error means the run could not be carried out; a run that found
// violations returns a Report whose Verdict is VerdictFail.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(cfg.Out, "%7.1fs  %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, a...))
	}
	if cfg.DatabaseURL != "" {
		if _, err := processURL(cfg.DatabaseURL); err != nil {
			return nil, err
		}
	}
	st, err := openStage(ctx, cfg.DatabaseURL, cfg.Workload,
		Env{Schema: cfg.Schema, Group: group, Partitions: cfg.Partitions, Keys: cfg.Keys}, cfg.Logger, say)
	if err != nil {
		return nil, err
	}
	defer st.close(ctx)
	pool, env, wl, cluster := st.pool, st.env, st.wl, st.cluster
	u, err := processURL(st.url)
	if err != nil {
		return nil, err
	}
	cc := pool.Config().ConnConfig
	target := net.JoinHostPort(cc.Host, fmt.Sprint(cc.Port))
	if cfg.PgBouncer {
		b, err := pgbouncer.Start(ctx, pgbouncer.Config{Server: st.url})
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		defer b.Remove()
		target = b.Addr()
		q := u.Query()
		q.Set("default_query_exec_mode", "exec") // no named prepared statements through the pooler
		u.RawQuery = q.Encode()
		say("PgBouncer (transaction pooling) is up on %s, between the workers' proxies and the server.", target)
	}

	dir := cfg.Dir
	keep := dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "leasehold-chaos-"); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	passed := false
	defer func() {
		if !keep && passed {
			os.RemoveAll(dir)
		}
	}()

	fl := &fleet{cfg: cfg, env: env, dir: dir}
	if cfg.RelayKill > 0 {
		fl.relayKills = make(chan relayKill, 64)
	}
	defer fl.stop(3*cfg.TTL + 5*time.Second)
	for i := range cfg.Workers {
		p, err := netproxy.Start(target)
		if err != nil {
			return nil, fmt.Errorf("chaos: proxy: %w", err)
		}
		pu := *u
		pu.Host = p.Addr()
		s := &slot{index: i, proxy: p, url: pu.String(), skewFile: filepath.Join(dir, fmt.Sprintf("w%d.skew", i)),
			pauseFile: filepath.Join(dir, fmt.Sprintf("w%d.pause", i))}
		fl.slots = append(fl.slots, s)
		if err := writeSkew(s.skewFile, 0); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		if err := fl.start(s); err != nil {
			return nil, err
		}
	}
	say("%d worker processes started (%s workload, %d partitions, TTL %v, seed %d%s)",
		cfg.Workers, cfg.Workload, cfg.Partitions, cfg.TTL, cfg.Seed, map[bool]string{true: ", UNFENCED control"}[cfg.Unfenced])
	if _, err := converge(ctx, pool, env, fl, 60*time.Second); err != nil {
		for _, s := range fl.slots {
			say("%s log: %s", s.id, fl.logTail(s.id))
		}
		return nil, err
	}
	say("every partition is held; fault phase of %v begins", cfg.Duration)

	plan := Plan(cfg.Seed, cfg.Duration, cfg.TTL, cfg.Workers, cfg.Faults)
	rep := &Report{Workload: cfg.Workload, Seed: cfg.Seed, Unfenced: cfg.Unfenced, PgBouncer: cfg.PgBouncer, Workers: cfg.Workers,
		Partitions: cfg.Partitions, TTLMS: cfg.TTL.Milliseconds(), Faults: map[Kind]*FaultStats{}}
	for _, k := range cfg.Faults {
		rep.Faults[k] = &FaultStats{}
	}
	if cfg.RelayKill > 0 {
		rep.Faults[RelayKill] = &FaultStats{}
	}
	if cfg.RelayPause > 0 {
		rep.Faults[RelayPause] = &FaultStats{}
	}

	phase := time.Now()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var confirmed []int64
	var feedErr error
	var bg sync.WaitGroup
	bg.Go(func() { confirmed, feedErr = wl.Feed(runCtx, pool, env, cfg.Jobs, cfg.Duration) })
	applied0, _ := wl.Applied(ctx, pool, env)

	inj := &injector{cfg: cfg, pool: pool, env: env, wl: wl, fleet: fl, cluster: cluster, say: say, phase: phase}
	// Workers that kill themselves (kafka-out) are started again at once,
	// through the drain.
	killsCtx, stopKills := context.WithCancel(ctx)
	defer stopKills()
	var watching sync.WaitGroup
	if fl.relayKills != nil {
		watching.Go(func() { inj.watchRelayKills(killsCtx, ctx) })
	}
	if cfg.RelayPause > 0 {
		watching.Go(func() { inj.watchRelayPauses(killsCtx, ctx) })
	}
	inj.run(runCtx, plan)
	applied1, _ := wl.Applied(ctx, pool, env)
	phaseLen := time.Since(phase)
	rep.DurationS = phaseLen.Seconds()
	rep.ThroughputPerS = float64(applied1-applied0) / phaseLen.Seconds()
	fl.healAll()
	bg.Wait()
	if feedErr != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("chaos: feeding jobs: %w", feedErr)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	say("fault phase over: %d jobs fed, %.0f applied/s; draining", len(confirmed), rep.ThroughputPerS)

	drained := time.Now()
	for {
		n, err := wl.Outstanding(ctx, pool, env)
		if err == nil && n == 0 {
			say("drained in %v", time.Since(drained).Round(time.Millisecond))
			break
		}
		if time.Since(drained) > cfg.Drain {
			say("%d jobs still outstanding after %v (err %v)", n, cfg.Drain, err)
			break
		}
		if ids := fl.restartExited(); len(ids) > 0 {
			say("workers exited on their own, started again: %v", ids)
		}
		if !sleepFor(ctx, 200*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	stopKills()
	watching.Wait()
	inj.kills.Wait() // each measurement ends within RecoveryLimit
	fl.stop(3*cfg.TTL + 5*time.Second)
	rep.WorkerExits = fl.unexpected

	if rep.Result, rep.TornLines, err = st.check(ctx, confirmed, dir); err != nil {
		return nil, err
	}
	rep.summarise(inj.records)
	passed = rep.Verdict == VerdictPass
	if !passed || keep {
		rep.Dir = dir
	}
	say("%s: %d jobs, %d lost, %d duplicates, %d stale refused, %d stale accepted, %d overlaps",
		rep.Verdict, rep.Jobs, rep.Lost, rep.Duplicates, rep.StaleRefused, rep.StaleAccepted, rep.Overlaps)
	if cfg.Workload == "kafka-out" {
		say("output: %d records read_committed (%d read_uncommitted), %d duplicates, %d missing, %d reordered; "+
			"relays: %d transactions, %d stale transactions refused by Kafka (%d requests; %d counted by the relays), %d failed, %d killed, %d paused",
			rep.Outputs, rep.OutputsUncommitted, rep.OutputDuplicates, rep.OutputMissing, rep.OutputReordered,
			rep.RelayTransactions, rep.RelayRefused, rep.RelayRefusedRequests, rep.RelayFenced, rep.RelayFailed, rep.RelayKills, rep.RelayPauses)
	}
	return rep, nil
}

// processURL parses the URL the worker processes connect by, through
// their proxies: a postgres:// URL with a host and port.
func processURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return nil, fmt.Errorf("%w: DatabaseURL must be a postgres:// URL with a host and port", ErrInvalidConfig)
	}
	return u, nil
}

// converge waits until every partition is held by a live worker.
func converge(ctx context.Context, pool *pgxpool.Pool, env Env, fl *fleet, within time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		if ok, _ := allHeld(ctx, pool, env, fl.live(), time.Time{}, 0); ok {
			return time.Since(start), nil
		}
		if time.Since(start) > within {
			return 0, errors.New("chaos: the workers did not claim every partition within " + within.String())
		}
		if !sleepFor(ctx, 100*time.Millisecond) {
			return 0, ctx.Err()
		}
	}
}

// allHeld reports whether every partition is held (by the database's
// clock) by one of the live members, under a lease granted or renewed
// after since. (A lease its holder gave up locally, say after its clock
// jumped, still looks held until it expires; one renewed since the fault
// is held by a worker that is working.) The database and this process
// share the machine's clock.
func allHeld(ctx context.Context, pool *pgxpool.Pool, env Env, live map[string]bool, since time.Time, ttl time.Duration) (bool, error) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h, err := handle(pool, env.Schema, nil)
	if err != nil {
		return false, err
	}
	st, err := partition.Inspect(qctx, h, env.Group)
	if err != nil {
		return false, err
	}
	for _, p := range st.Partitions {
		if !p.Held || !live[p.Owner] || p.Expires.Before(since.Add(ttl)) {
			return false, nil
		}
	}
	return len(st.Partitions) == env.Partitions, nil
}

// summarise fills the fault statistics.
func (r *Report) summarise(records []FaultRecord) {
	r.FaultLog = records
	var all []int64
	byKind := map[Kind][]int64{}
	for _, f := range records {
		st := r.Faults[f.Kind]
		if st == nil {
			st = &FaultStats{}
			r.Faults[f.Kind] = st
		}
		switch {
		case f.Skipped:
			st.Skipped++
			continue
		case f.RecoveryMS < 0:
			st.Injected++
			st.Unrecovered++
			r.Unrecovered++
			continue
		}
		st.Injected++
		all = append(all, f.RecoveryMS)
		byKind[f.Kind] = append(byKind[f.Kind], f.RecoveryMS)
	}
	r.RecoveryP50MS, r.RecoveryP99MS, r.RecoveryMaxMS = percentiles(all)
	for k, v := range byKind {
		st := r.Faults[k]
		st.RecoveryP50MS, st.RecoveryP99MS, st.RecoveryMaxMS = percentiles(v)
	}
}

// percentiles returns the nearest-rank p50, p99 and max of v (zeros for
// none).
func percentiles(v []int64) (p50, p99, maxv int64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) int64 {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.50), rank(0.99), s[len(s)-1]
}
