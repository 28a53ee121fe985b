package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
)

// The lease suite's failover cases: a separate OS process (this binary,
// re-executed as a lease holder) holds a lease, and an Acquire waiting for
// it in this process is timed from the holder's end until it holds the
// lease: after kill -9 (the lease must expire: about the TTL) and after a
// graceful stop (SIGTERM: the holder releases the lease and exits).
const (
	caseFailoverKill = "failover-kill"
	caseFailoverStop = "failover-stop"
)

// The environment of a re-executed lease holder.
const (
	holderEnv       = "LEASEHOLD_BENCH_LEASE_HOLDER" // the lease name; set means "be a holder"
	holderURLEnv    = "LEASEHOLD_BENCH_LEASE_HOLDER_URL"
	holderSchemaEnv = "LEASEHOLD_BENCH_LEASE_HOLDER_SCHEMA"
	holderTTLEnv    = "LEASEHOLD_BENCH_LEASE_HOLDER_TTL"
)

// isLeaseHolder reports whether this process was started as a lease holder.
func isLeaseHolder() bool { return os.Getenv(holderEnv) != "" }

// leaseHolderMain is the holder process: it acquires the lease named by
// holderEnv with a Client of the given TTL, prints "held <token>", and on
// SIGTERM releases it, prints "released" and exits 0. SIGKILL leaves the
// lease to expire.
func leaseHolderMain(stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "lease holder: %v\n", err)
		return 1
	}
	ttl, err := time.ParseDuration(os.Getenv(holderTTLEnv))
	if err != nil {
		return fail(err)
	}
	pc, err := pgxpool.ParseConfig(os.Getenv(holderURLEnv))
	if err != nil {
		return fail(err)
	}
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	db, err := lhDB(pool, os.Getenv(holderSchemaEnv))
	if err != nil {
		return fail(err)
	}
	c, err := lease.New(db, lease.Config{TTL: ttl, Owner: "bench-holder-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		return fail(err)
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	l, err := c.Acquire(actx, os.Getenv(holderEnv))
	cancel()
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "held %d\n", l.Token())
	select {
	case <-ctx.Done():
	case <-l.Done():
		return fail(fmt.Errorf("lost the lease: %w", l.Err()))
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Release(rctx); err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, "released")
	c.Close(rctx)
	return 0
}

// failover measures rounds failovers of kind c (caseFailoverKill or
// caseFailoverStop) of a lease held by a separate process, each timed
// from the signal until a waiting Acquire in this process returns. The
// sample's latencies are the failover times; its rate is unused.
func (b *leaseBench) failover(ctx context.Context, c string, rounds int) (sample, error) {
	exe, err := os.Executable()
	if err != nil {
		return sample{}, err
	}
	db, err := lhDB(b.admin, b.f.schema)
	if err != nil {
		return sample{}, err
	}
	waiter, err := lease.New(db, lease.Config{TTL: b.f.failoverTTL, Owner: "bench-waiter"})
	if err != nil {
		return sample{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		waiter.Close(cctx)
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	var smp sample
	for r := range rounds {
		name := fmt.Sprintf("failover/%s/%d", c, r)
		d, err := b.failoverOnce(ctx, exe, waiter, name, c, rng)
		if err != nil {
			return smp, fmt.Errorf("%s round %d: %w", c, r+1, err)
		}
		smp.lat = append(smp.lat, d)
		smp.ops++
		smp.elapsed += d
	}
	slices.Sort(smp.lat)
	return smp, nil
}

// failoverOnce starts a holder of name, starts waiting for name, ends the
// holder at a random phase of its renewal cycle and returns the time from
// that signal until the waiter holds the lease.
func (b *leaseBench) failoverOnce(ctx context.Context, exe string, waiter *lease.Client, name, c string, rng *rand.Rand) (time.Duration, error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), holderEnv+"="+name, holderURLEnv+"="+b.url, holderSchemaEnv+"="+b.f.schema,
		holderTTLEnv+"="+b.f.failoverTTL.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "held ") {
			return 0, fmt.Errorf("the holder did not get the lease (%q): %s", l, stderr.String())
		}
	case <-time.After(30 * time.Second):
		return 0, errors.New("the holder did not report holding the lease within 30s")
	}
	type got struct {
		l   *lease.Lease
		at  time.Time
		err error
	}
	acquired := make(chan got, 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second+3*b.f.failoverTTL)
	defer cancel()
	go func() {
		l, err := waiter.Acquire(wctx, name)
		acquired <- got{l, time.Now(), err}
	}()
	// End the holder at a random phase of its renewal cycle (TTL/3).
	if err := sleepCtx(ctx, time.Duration(rng.Int64N(int64(b.f.failoverTTL/3)))+10*time.Millisecond); err != nil {
		return 0, err
	}
	sig := syscall.SIGKILL
	if c == caseFailoverStop {
		sig = syscall.SIGTERM
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		return 0, err
	}
	g := <-acquired
	if g.err != nil {
		return 0, fmt.Errorf("waiting acquire: %w (holder: %s)", g.err, stderr.String())
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	g.l.Release(rctx)
	if c == caseFailoverStop {
		for l := range lines {
			if l == "released" {
				return g.at.Sub(t0), nil
			}
		}
		return 0, fmt.Errorf("the holder did not release its lease on SIGTERM: %s", stderr.String())
	}
	return g.at.Sub(t0), nil
}
