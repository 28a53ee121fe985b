package main

import (
	"context"
	"fmt"
	"time"
)

// loadResult is the database load of k members of a group of n partitions
// in steady state.
type loadResult struct {
	k, n     int
	converge time.Duration // from starting all k at once until converged
	window   time.Duration
	xacts    int64 // transactions in the bench database over the window (server side)
	stmts    int64 // statements the members sent over the window (client side)
	conns    int   // the members' server connections at the window's end
}

func (r loadResult) connsPerMember() float64 { return float64(r.conns) / float64(r.k) }

func (r loadResult) xactsPerMember() float64 {
	return float64(r.xacts) / float64(r.k) / r.window.Seconds()
}

func (r loadResult) stmtsPerMember() float64 {
	return float64(r.stmts) / float64(r.k) / r.window.Seconds()
}

// runLoad starts k members of a fresh group of n partitions at once, waits
// for them to converge and for the statistics to settle, then counts the
// bench database's transactions over the window. Nothing else uses the
// bench database meanwhile: the counters are read from another database.
func runLoad(ctx context.Context, env *partitionsEnv, f partitionsFlags, k, n int) (res loadResult, err error) {
	res = loadResult{k: k, n: n}
	fl := newFleet(env, fmt.Sprintf("load-k%d-n%d", k, n), n, f.ttl, false)
	defer func() {
		if cerr := fl.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	t0 := time.Now()
	start := fl.startMany
	if f.loadOneByOne {
		start = fl.startOneByOne
	}
	if err := start(ctx, k); err != nil {
		return res, err
	}
	if res.converge, err = fl.waitConverged(ctx, t0, convergeWithin); err != nil {
		return res, err
	}
	// Every backend flushes its counters when idle, at most once a second
	// (PostgreSQL 15); after the settle time the convergence checks are all
	// counted, and both reads below lag the members' activity alike.
	if err := sleepCtx(ctx, f.loadSettle); err != nil {
		return res, err
	}
	x0, err := env.xacts(ctx)
	if err != nil {
		return res, fmt.Errorf("read statistics: %w", err)
	}
	s0, w0 := fl.stmts(), time.Now()
	if err := sleepCtx(ctx, f.loadWindow); err != nil {
		return res, err
	}
	x1, err := env.xacts(ctx)
	if err != nil {
		return res, fmt.Errorf("read statistics: %w", err)
	}
	res.stmts, res.window = fl.stmts()-s0, time.Since(w0)
	res.xacts = x1 - x0
	if res.conns, err = env.memberConns(ctx); err != nil {
		return res, fmt.Errorf("count connections: %w", err)
	}
	fmt.Fprintf(env.stderr, "  load k=%-2d n=%-4d converged in %5.0f ms; %.2f xacts/s and %.2f statements/s per member; "+
		"%.2f server connections per member\n",
		k, n, ms(res.converge), res.xactsPerMember(), res.stmtsPerMember(), res.connsPerMember())
	return res, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loadTable renders the load part and its JSON rows.
func loadTable(f partitionsFlags, rs []loadResult) (ptable, []partitionsRow) {
	t := ptable{
		title: "Database load per member in steady state",
		notes: []string{fmt.Sprintf("TTL %v (heartbeat and renewal every %v), PollInterval 1s (default). "+
			"xacts = xact_commit + xact_rollback of the bench database in pg_stat_database over a %v window, "+
			"%v after convergence, read from another database; statements = Exec/Query calls the members sent "+
			"(pgx tracer). converge = from starting all members at once (with --load-one-by-one: from the first Start "+
			"of members started one after the other) until converged. server connections = the bench database's "+
			"backends at the window's end, the observer's left out (with --pgbouncer: the pooler's server connections "+
			"and the members' direct LISTEN sessions).",
			f.ttl, (f.ttl / 3).Round(time.Millisecond), f.loadWindow, f.loadSettle)},
		header: []string{"members", "partitions", "xacts/s per member", "statements/s per member", "xacts/s total", "converge ms",
			"server connections per member"},
	}
	var rows []partitionsRow
	for _, r := range rs {
		t.add(fmt.Sprint(r.k), fmt.Sprint(r.n), f2(r.xactsPerMember()), f2(r.stmtsPerMember()),
			f1(float64(r.xacts)/r.window.Seconds()), f0(ms(r.converge)), f2(r.connsPerMember()))
		rows = append(rows, partitionsRow{
			System: "leasehold", Case: "load", Members: r.k, Partitions: r.n,
			XactsPerSecPerMember: r.xactsPerMember(), StmtsPerSecPerMember: r.stmtsPerMember(), ConnsPerMember: r.connsPerMember(),
			WindowSeconds: r.window.Seconds(),
		})
	}
	return t, rows
}
