package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// convergeWithin bounds every wait for a group to converge.
const convergeWithin = 60 * time.Second

// crashStopTimeout bounds the Stop of a member whose proxy was cut.
const crashStopTimeout = time.Second

// timing is the measured times of one case of the handoff and crash parts.
type timing struct {
	kase       string
	from, to   int // members before and after the change
	partitions int
	samples    []time.Duration
}

// quantileOf returns the nearest-rank quantile q of ds, sorted.
func quantileOf(ds []time.Duration, q float64) time.Duration {
	s := sample{lat: slices.Sorted(slices.Values(ds))}
	return s.quantile(q)
}

// runHandoff measures graceful leaves and joins: a group of members
// members; each round one member, picked at random, stops (timed until the
// rest converge), then a fresh member starts (timed until all converge).
func runHandoff(ctx context.Context, env *partitionsEnv, f partitionsFlags, rng *rand.Rand) (leave, join timing, err error) {
	leave = timing{kase: "graceful leave", from: f.members, to: f.members - 1, partitions: f.partitions}
	join = timing{kase: "graceful join", from: f.members - 1, to: f.members, partitions: f.partitions}
	fl, err := startedFleet(ctx, env, "handoff", f, false)
	defer func() {
		if cerr := fl.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err != nil {
		return leave, join, err
	}
	for r := range f.rounds {
		victim := fl.pick(rng.IntN(f.members))
		fl.remove(victim)
		t0 := time.Now()
		stopped := make(chan error, 1)
		go func() { stopped <- stopMember(ctx, victim, 15*time.Second) }()
		d, err := fl.waitConverged(ctx, t0, convergeWithin)
		if serr := <-stopped; err == nil && serr != nil {
			err = fmt.Errorf("stop %s: %w", victim.id, serr)
		}
		if err != nil {
			return leave, join, fmt.Errorf("leave, round %d: %w", r+1, err)
		}
		leave.samples = append(leave.samples, d)

		t0 = time.Now()
		if _, err := fl.start(ctx); err != nil {
			return leave, join, err
		}
		dj, err := fl.waitConverged(ctx, t0, convergeWithin)
		if err != nil {
			return leave, join, fmt.Errorf("join, round %d: %w", r+1, err)
		}
		join.samples = append(join.samples, dj)
		fmt.Fprintf(env.stderr, "  handoff round %2d: leave %4.0f ms, join %4.0f ms\n", r+1, ms(d), ms(dj))
	}
	return leave, join, nil
}

// runCrash measures failovers: each member connects through a proxy of its
// own; each round the proxy of a member picked at random is cut (the member
// can no longer renew or heartbeat), timed until the others converge
// without it. The crash comes a random time (one to two renew intervals)
// after the group converged. The crashed member is then stopped, and a
// fresh member joins untimed before the next round.
func runCrash(ctx context.Context, env *partitionsEnv, f partitionsFlags, rng *rand.Rand) (crash timing, err error) {
	crash = timing{kase: "crash failover", from: f.members, to: f.members - 1, partitions: f.partitions}
	fl, err := startedFleet(ctx, env, "crash", f, true)
	defer func() {
		if cerr := fl.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err != nil {
		return crash, err
	}
	renew := f.ttl / 3 // lease.Config's default RenewInterval, also the heartbeat interval
	for r := range f.crashRounds {
		// Crash at a random phase of the renewal cycle, not right after
		// the (re)join's fresh grants.
		if err := sleepCtx(ctx, renew+time.Duration(rng.Int64N(int64(renew)))); err != nil {
			return crash, err
		}
		victim := fl.pick(rng.IntN(f.members))
		fl.remove(victim)
		t0 := time.Now()
		victim.proxy.Cut()
		d, err := fl.waitConverged(ctx, t0, convergeWithin)
		stopMember(ctx, victim, crashStopTimeout) // fails: it cannot reach the server, and need not
		if err != nil {
			return crash, fmt.Errorf("crash, round %d: %w", r+1, err)
		}
		crash.samples = append(crash.samples, d)
		fmt.Fprintf(env.stderr, "  crash round %2d: failover %4.0f ms\n", r+1, ms(d))
		if _, err := fl.start(ctx); err != nil {
			return crash, err
		}
		if _, err := fl.waitConverged(ctx, time.Now(), convergeWithin); err != nil {
			return crash, fmt.Errorf("rejoin after crash %d: %w", r+1, err)
		}
	}
	return crash, nil
}

// timingTable renders the handoff and crash cases and their JSON rows.
func timingTable(f partitionsFlags, cases []timing) (ptable, []partitionsRow) {
	renew := (f.ttl / 3).Round(time.Millisecond)
	t := ptable{
		title: "Handoff and failover",
		notes: []string{fmt.Sprintf("In-process members on one PostgreSQL; TTL %v (heartbeat and renewal every %v), "+
			"PollInterval 1s (default); Run waits for its context. Time from Member.Stop (leave), Member.Start (join) "+
			"or cutting the member's TCP proxy (crash) until every partition is held by its desired owner among the "+
			"expected live members (partition.Inspect polled every %v). A crash comes 1-2 renew intervals "+
			"(random) after the group converged.", f.ttl, renew, convergePoll)},
		header: []string{"case", "members", "partitions", "samples", "min ms", "p50 ms", "p99 ms", "max ms"},
	}
	var rows []partitionsRow
	for _, c := range cases {
		if len(c.samples) == 0 {
			continue
		}
		lo, p50, p99, hi := quantileOf(c.samples, 0), quantileOf(c.samples, 0.5), quantileOf(c.samples, 0.99), quantileOf(c.samples, 1)
		t.add(c.kase, fmt.Sprintf("%d -> %d", c.from, c.to), fmt.Sprint(c.partitions), fmt.Sprint(len(c.samples)),
			f0(ms(lo)), f0(ms(p50)), f0(ms(p99)), f0(ms(hi)))
		rows = append(rows, partitionsRow{
			System: "leasehold", Case: c.kase, Partitions: c.partitions, Members: c.from, Samples: len(c.samples),
			MinMs: ms(lo), P50Ms: ms(p50), P99Ms: ms(p99), MaxMs: ms(hi),
		})
	}
	return t, rows
}
