package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
)

func init() {
	register(suite{
		name:    "lease",
		summary: "lease.Client acquire, renew and release against the same statements sent raw via pgx",
		run:     runLease,
	})
}

// The lease suite's cases, in the order they run within a round. release
// sizes its stock of pre-acquired leases from the acquire rate just
// measured, so it comes after acquire.
var leaseCases = []string{"acquire", "renew", "release"}

// leaseTTL is long enough that neither the Client's background renewal nor
// a local deadline fires during a run: the cases measure the calls alone.
const leaseTTL = time.Hour

// releaseStockFactor over-provisions the release case's pre-acquired leases
// relative to what the acquire rate predicts the duration needs.
const releaseStockFactor = 4.0

// leaseTarget is the leasehold/raw-sql rate ratio the suite aims for.
const leaseTarget = 0.80

// leaseBench is one run of the lease suite.
type leaseBench struct {
	f       leaseFlags
	url     string        // the server, for the failover cases' holder processes
	admin   *pgxpool.Pool // migrations and truncation, outside both systems' pools
	q       rawQueries
	systems []leaseSystem
	stderr  io.Writer
	// acquireRate is each system's latest acquire rate, to size the release
	// case's stock.
	acquireRate map[string]float64
}

func runLease(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f, err := parseLeaseFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if f.memProfile != "" {
		defer func() {
			if werr := writeAllocProfile(f.memProfile); werr != nil && err == nil {
				err = werr
			}
		}()
	}
	began := time.Now()
	url, where, cleanup, err := database(ctx, false)
	if err != nil {
		return err
	}
	defer cleanup()

	acfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	acfg.MaxConns, acfg.MinConns = 2, 0
	if f.planCacheMode != "" {
		// The lease Client derives its pool from this one, so it inherits
		// the setting; rawPool sets the same.
		acfg.ConnConfig.RuntimeParams["plan_cache_mode"] = f.planCacheMode
	}
	admin, err := pgxpool.NewWithConfig(ctx, acfg)
	if err != nil {
		return err
	}
	defer admin.Close()

	created, err := prepareSchema(ctx, admin, f.schema)
	if err != nil {
		return err
	}
	if created {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if _, derr := admin.Exec(dctx, "DROP SCHEMA "+quoteIdent(f.schema)+" CASCADE"); derr != nil && err == nil {
				err = fmt.Errorf("drop schema %s: %w", f.schema, derr)
			}
		}()
	}

	db, err := lhDB(admin, f.schema)
	if err != nil {
		return err
	}
	client, err := lease.New(db, lease.Config{
		Owner:    "bench-" + sysLeasehold,
		TTL:      leaseTTL,
		MaxConns: 4,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		client.Close(cctx)
	}()
	raw, err := rawPool(ctx, url, client.Config(), f.planCacheMode)
	if err != nil {
		return err
	}
	defer raw.Close()

	q, err := renderQueries(f.schema)
	if err != nil {
		return err
	}
	b := &leaseBench{
		f:     f,
		url:   url,
		admin: admin,
		q:     q,
		systems: []leaseSystem{
			&leaseholdSystem{c: client},
			&rawSystem{pool: raw, q: q, owner: "bench-" + sysRaw, ttl: leaseTTL.Microseconds()},
		},
		stderr:      stderr,
		acquireRate: map[string]float64{},
	}
	var version string
	admin.QueryRow(ctx, "SHOW server_version").Scan(&version)
	fmt.Fprintf(stderr, "lease suite: PostgreSQL %s, %s; %d rounds x %d cases x %d systems x %v, %d workers, warm-up %v\n",
		version, where, f.rounds, len(f.cases), len(b.systems), f.duration, f.workers, f.warmup)

	if f.warmup > 0 {
		if _, err := b.round(ctx, "warm", f.warmup); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	all := make([]*series, 0, len(f.cases)*len(b.systems))
	index := map[[2]string]*series{}
	for _, c := range f.cases {
		for _, s := range b.systems {
			sr := &series{system: s.name(), kase: c}
			all = append(all, sr)
			index[[2]string{s.name(), c}] = sr
		}
	}
	for r := 1; r <= f.rounds; r++ {
		got, err := b.round(ctx, "r"+strconv.Itoa(r), f.duration)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		for k, smp := range got {
			index[k].samples = append(index[k].samples, smp)
		}
	}

	for _, c := range []string{caseFailoverKill, caseFailoverStop} {
		if f.failoverRounds == 0 {
			break
		}
		smp, err := b.failover(ctx, c, f.failoverRounds)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "  %-14s %-10s %d failovers  p50 %.1f ms  p99 %.1f ms\n", c, sysLeasehold, smp.ops,
			ms(smp.quantile(0.5)), ms(smp.quantile(0.99)))
		all = append(all, &series{system: sysLeasehold, kase: c, samples: []sample{smp}})
	}

	rep := newReport("lease", f.rounds, all, sysLeasehold, sysRaw)
	held := "unbounded"
	if f.batch > 0 {
		held = fmt.Sprintf("<= %d leases held per system (--batch %d)", f.workers*f.batch, f.batch)
	}
	fmt.Fprintf(stdout, "lease suite: PostgreSQL %s (%s)\n"+
		"%d rounds x %v per case and system (%d alternating slices), %d workers, pools of %d conns, GOMAXPROCS %d,\n"+
		"acquire/release %s; medians over rounds\n\n",
		version, where, f.rounds, f.duration, f.slices, f.workers, client.Config().MaxConns, runtime.GOMAXPROCS(0), held)
	var table strings.Builder
	printTable(&table, rep, all, sysLeasehold, sysRaw, leaseTarget)
	if f.failoverRounds > 0 {
		fmt.Fprintf(&table, "\nfailover-kill, failover-stop: leasehold only (no peer, no ratio), %d failovers each of a lease "+
			"(TTL %v) held by a separate process,\nkilled with SIGKILL or stopped with SIGTERM (it releases the lease); "+
			"p50/p99: from the signal until a waiting Acquire\n(MinBackoff 20ms, MaxBackoff 1s) in this process holds "+
			"the lease; ops/s: the inverse of their mean\n", f.failoverRounds, f.failoverTTL)
	}
	io.WriteString(stdout, table.String())
	if f.docPath != "" {
		doc := fmt.Sprintf("%s\n\nCommand: `cd bench && go run . lease %s`\n\n```text\n%s```\n",
			machineLine(version+" ("+where+")", fmt.Sprintf("%d rounds x %v per case and system, %d workers, pools of %d conns",
				f.rounds, f.duration, f.workers, client.Config().MaxConns), began),
			strings.Join(args, " "), table.String())
		if err := writeDocSection(f.docPath, "lease", doc); err != nil {
			return err
		}
	}
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, rep); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "lease suite: done in %v\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

// round runs every case on every system for d each, and returns the
// samples by (system, case). Each case's d is cut into slices that run
// systems alternately (leasehold, raw-sql, leasehold, raw-sql, ...), so
// that a passing disturbance on the machine hits both alike.
func (b *leaseBench) round(ctx context.Context, tag string, d time.Duration) (map[[2]string]sample, error) {
	out := map[[2]string]sample{}
	slice := d / time.Duration(b.f.slices)
	for _, c := range b.f.cases {
		for k := range b.f.slices {
			for _, s := range b.systems {
				smp, err := b.one(ctx, s, c, tag+"s"+strconv.Itoa(k), slice)
				if err != nil {
					return nil, fmt.Errorf("%s on %s: %w", c, s.name(), err)
				}
				key := [2]string{s.name(), c}
				out[key] = out[key].merge(smp)
			}
		}
		for _, s := range b.systems {
			smp := out[[2]string{s.name(), c}]
			if c == "acquire" {
				b.acquireRate[s.name()] = smp.rate()
			}
			fmt.Fprintf(b.stderr, "  %-5s %-8s %-10s %9.0f ops/s  p50 %.3f ms  p99 %.3f ms  client CPU %.1f µs/op (GC %.1f)  %.1f allocs/op\n",
				tag, c, s.name(), smp.rate(), ms(smp.quantile(0.5)), ms(smp.quantile(0.99)),
				float64(smp.cpuPerOp())/float64(time.Microsecond), float64(smp.gcCPUPerOp())/float64(time.Microsecond),
				smp.allocsPerOp())
		}
	}
	return out, nil
}

// one measures case c on system s for d, starting from an empty lease
// table and leaving one behind.
func (b *leaseBench) one(ctx context.Context, s leaseSystem, c, tag string, d time.Duration) (sample, error) {
	if err := b.reset(ctx, s); err != nil {
		return sample{}, err
	}
	defer b.reset(context.WithoutCancel(ctx), s)
	var p plan
	var err error
	switch c {
	case "acquire":
		p = s.acquirePlan(tag, b.f.batch)
	case "renew":
		p, err = s.renewPlan(ctx, tag, b.f.workers, b.f.held)
	case "release":
		p = s.releasePlan(tag, b.f.workers, b.f.batch, b.releaseStock(s.name(), d))
	default:
		err = fmt.Errorf("unknown case %q", c)
	}
	if err != nil {
		return sample{}, fmt.Errorf("set up: %w", err)
	}
	return measure(ctx, b.f.workers, d, p, "system", s.name(), "case", c)
}
