package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// demo is the state of one run of the story.
type demo struct {
	out    *display
	log    *slog.Logger
	url    string
	pool   *pgxpool.Pool // the onlookers' pool: enqueues, status, tally
	h      *leasehold.DB // leasehold's handle on pool, in demoSchema
	schema string        // the quoted schema name
	names  []string      // the workers' names, in order
	runs   *runs
	prod   *producer
	rep    report

	mu    sync.Mutex
	shown string // the ownership row printed last
}

// story runs the fleet through a crash and a pause.
func (d *demo) story(ctx context.Context) error {
	d.runs = newRuns()
	d.names = []string{"worker-1", "worker-2", "worker-3"}
	client, err := queue.New(d.h, queue.Config{})
	if err != nil {
		return err
	}
	d.prod = newProducer(client, demoJobs)

	var fleet []*demoWorker
	crashed := make(map[*demoWorker]bool)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for _, dw := range fleet {
			wg.Go(func() {
				if err := dw.stop(sctx, crashed[dw]); err != nil {
					d.log.Warn("demo: stopping a worker failed", "worker", dw.name, "err", err)
				}
				dw.close()
			})
		}
		wg.Wait()
	}()
	for _, n := range d.names {
		dw, err := d.startWorker(ctx, n)
		if err != nil {
			return err
		}
		fleet = append(fleet, dw)
	}
	a, b := fleet[0], fleet[1]
	d.out.say("Three workers run in this process, each with its own connection pool (through a fault")
	d.out.line("         proxy) and its own clock. They join group %q of %d partitions and claim them", demoGroup, demoPartitions)
	d.out.line("         with leases (TTL %v) carrying fencing tokens.", demoTTL)
	st, _, err := d.waitStatus(ctx, 30*time.Second, "the three workers to share the partitions", func(st partition.Status) bool {
		return heldBy(st, d.names...) && len(holders(st)) == 3
	})
	if err != nil {
		return err
	}
	d.out.line("%s", ownersHeader(demoPartitions))
	d.showOwners(st)
	d.out.say("Enqueuing %d deposits to %d accounts. Each handler inserts its deposit into a ledger", demoJobs, demoAccounts)
	d.out.line("         inside the job's transaction, which commits only if the partition's token is current.")

	mctx, stopMonitor := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { d.monitor(mctx) })
	produced := make(chan error, 1)
	bg.Go(func() { produced <- d.prod.run(mctx, demoProduce) })
	defer func() {
		stopMonitor()
		bg.Wait()
		d.out.done()
	}()
	if err := d.waitApplied(ctx, demoJobs/5, 30*time.Second); err != nil {
		return err
	}

	if err := d.crash(ctx, a); err != nil {
		return err
	}
	crashed[a] = true
	if err := sleep(ctx, 700*time.Millisecond); err != nil {
		return err
	}
	if err := d.pause(ctx, b); err != nil {
		return err
	}

	if err := <-produced; err != nil {
		return err
	}
	if err := d.waitDone(ctx, 60*time.Second); err != nil {
		return err
	}
	// Let worker-2's rejoin show in the table; not needed for the report.
	d.waitStatus(ctx, 10*time.Second, "", func(st partition.Status) bool {
		h := holders(st)
		return heldBy(st, "worker-2", "worker-3") && h["worker-2"] > 0 && h["worker-3"] > 0
	})
	if err := sleep(ctx, 300*time.Millisecond); err != nil {
		return err
	}
	stopMonitor()
	bg.Wait()
	d.out.done()
	d.out.say("All %d jobs are finished. Stopping worker-2 and worker-3 gracefully.", d.prod.enqueued.Load())
	return nil
}

// crash crashes worker a and waits until the others hold every partition.
func (d *demo) crash(ctx context.Context, a *demoWorker) error {
	before, err := partition.Inspect(ctx, d.h, demoGroup)
	if err != nil {
		return err
	}
	mine := partitionsOf(before, a.name)
	a.crash()
	crashed := time.Now()
	d.out.say("worker-1 CRASHES: its connections are cut, its clock and handlers freeze, and it never")
	d.out.line("         calls Stop. Its partitions %v stall until their leases expire.", mine)
	st, at, err := d.waitStatus(ctx, 30*time.Second, "the survivors to take over", func(st partition.Status) bool {
		return heldBy(st, "worker-2", "worker-3")
	})
	if err != nil {
		return err
	}
	d.rep.FailoverMS = at.Sub(crashed).Milliseconds()
	d.out.say("FAILOVER: worker-2 and worker-3 hold every partition %s after the crash, with new tokens", secs(at.Sub(crashed)))
	if len(mine) > 0 {
		p := mine[0]
		d.out.line("         (partition %d: token %d -> %d).", p, before.Partitions[p].Token, st.Partitions[p].Token)
	}
	d.showOwners(st)
	return nil
}

// pause freezes worker b mid-job past its leases, waits until another
// worker holds every partition, then resumes b and watches the fence refuse
// its late commits.
func (d *demo) pause(ctx context.Context, b *demoWorker) error {
	before, err := partition.Inspect(ctx, d.h, demoGroup)
	if err != nil {
		return err
	}
	mine := partitionsOf(before, b.name)
	b.gate.close()
	if !waitFor(ctx, time.Second, func() bool { return len(b.gate.held()) > 0 }) {
		// Its partitions ran dry: give them work.
		if err := d.prod.topUp(ctx, mine); err != nil {
			return err
		}
		if !waitFor(ctx, 15*time.Second, func() bool { return len(b.gate.held()) > 0 }) {
			b.gate.open()
			return errors.New("demo: no handler of worker-2 reached its gate")
		}
	}
	// Let the runs already past the gate commit: a transaction frozen
	// between its fence check and its commit would hold the lease row (the
	// check locks it) and keep the takeover waiting until the database
	// timed it out. The runs frozen at the gate hold no lease lock.
	if err := sleep(ctx, 200*time.Millisecond); err != nil {
		b.gate.open()
		return err
	}
	b.clock.pause()
	b.proxy.Blackhole()
	paused := time.Now()
	held := b.gate.held()
	h := held[0]
	d.out.say("worker-2 PAUSES mid-job (think GC pause, SIGSTOP, VM migration): %s inserted a", count(len(held), "handler has", "handlers have"))
	d.out.line("         deposit in a transaction that waits to commit (job %d, partition %d, token %d%s).", h.Job, h.Partition, h.Token, more(len(held)))
	d.out.line("         Its clock stops and its connections go silent; from the inside it notices nothing.")
	st, at, err := d.waitStatus(ctx, 30*time.Second, "worker-3 to take over", func(st partition.Status) bool {
		return heldBy(st, "worker-3")
	})
	if err != nil {
		b.gate.open()
		return err
	}
	d.rep.PauseTakeoverMS = at.Sub(paused).Milliseconds()
	d.out.say("TAKEOVER: worker-3 holds every partition %s after the pause: worker-2's leases expired", secs(at.Sub(paused)))
	d.out.line("         in the database and were granted again (partition %d: token %d -> %d).",
		h.Partition, h.Token, st.Partitions[h.Partition].Token)
	d.showOwners(st)

	b.proxy.Heal()
	held = b.gate.open()
	its := "its held handler returns"
	if len(held) > 1 {
		its = fmt.Sprintf("its %d held handlers return", len(held))
	}
	d.out.say("worker-2 RESUMES, still believing it holds its partitions: %s and", its)
	d.out.line("         the queue goes on to commit with the old token...")
	known := func(r heldRun) bool {
		_, ok := d.runs.outcomeOf(runKey{b.name, r.Job, r.Attempt})
		return ok
	}
	waitFor(ctx, 20*time.Second, func() bool { return !slices.ContainsFunc(held, func(r heldRun) bool { return !known(r) }) })
	fenced := 0
	for _, r := range held {
		if o, _ := d.runs.outcomeOf(runKey{b.name, r.Job, r.Attempt}); o == queue.OutcomeFenced {
			fenced++
		}
	}
	d.out.say("REFUSED: the fence refused %d of %s (the partition's token moved on): the",
		fenced, count(len(held), "commit", "commits"))
	d.out.line("         deposits roll back with them, and the new owner applies those jobs, once.")
	stood := b.clock.resume()
	d.out.say("worker-2's clock catches up by %s: it finds its leases lost and rejoins the group.", secs(stood))
	return nil
}

// monitor shows the progress and, whenever it changes, the ownership
// table, until ctx is done.
func (d *demo) monitor(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		applied, err := d.count(ctx, "completed")
		if err == nil {
			d.out.progress(applied, int(d.prod.enqueued.Load()), int(d.prod.total.Load()))
		}
		if st, err := partition.Inspect(ctx, d.h, demoGroup); err == nil {
			d.showOwners(st)
		}
	}
}

// showOwners prints the ownership table's row for st unless it is the
// row printed last.
func (d *demo) showOwners(st partition.Status) {
	row := ownersRow(st, d.names)
	d.mu.Lock()
	defer d.mu.Unlock()
	if row != d.shown {
		d.shown = row
		d.out.say("%s", row)
	}
}

// count returns how many of the group's jobs are in state.
func (d *demo) count(ctx context.Context, state string) (int, error) {
	var n int
	err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.schema+`.jobs WHERE group_name = $1 AND state = $2`,
		demoGroup, state).Scan(&n)
	return n, err
}

// waitApplied waits until n jobs are completed.
func (d *demo) waitApplied(ctx context.Context, n int, within time.Duration) error {
	var err error
	if !waitFor(ctx, within, func() bool {
		var c int
		c, err = d.count(ctx, "completed")
		return err == nil && c >= n
	}) {
		return errors.Join(fmt.Errorf("demo: fewer than %d jobs completed within %v", n, within), err, context.Cause(ctx))
	}
	return nil
}

// waitDone waits until no job is pending.
func (d *demo) waitDone(ctx context.Context, within time.Duration) error {
	var err error
	if !waitFor(ctx, within, func() bool {
		var c int
		c, err = d.count(ctx, "pending")
		return err == nil && c == 0
	}) {
		return errors.Join(fmt.Errorf("demo: jobs still pending after %v", within), err, context.Cause(ctx))
	}
	return nil
}

// waitStatus polls the group's status until ok holds and returns it, with
// the time it was read. what names the wait in the error.
func (d *demo) waitStatus(ctx context.Context, within time.Duration, what string, ok func(partition.Status) bool) (partition.Status, time.Time, error) {
	var st partition.Status
	var at time.Time
	var err error
	if waitFor(ctx, within, func() bool {
		st, err = partition.Inspect(ctx, d.h, demoGroup)
		at = time.Now()
		return err == nil && ok(st)
	}) {
		return st, at, nil
	}
	return st, at, errors.Join(fmt.Errorf("demo: waited %v for %s", within, what), err, context.Cause(ctx))
}

// waitFor polls cond every 20ms until it holds (true), within passes or ctx
// is done (false).
func waitFor(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
			return false
		}
	}
}

// heldBy reports whether every partition's lease is held by one of names.
func heldBy(st partition.Status, names ...string) bool {
	for _, ps := range st.Partitions {
		if !ps.Held || !slices.Contains(names, ps.Owner) {
			return false
		}
	}
	return len(st.Partitions) > 0
}

// holders counts the partitions held by each member.
func holders(st partition.Status) map[string]int {
	m := make(map[string]int)
	for _, ps := range st.Partitions {
		if ps.Held {
			m[ps.Owner]++
		}
	}
	return m
}

// partitionsOf returns the partitions name holds.
func partitionsOf(st partition.Status, name string) []int {
	var ps []int
	for _, p := range st.Partitions {
		if p.Held && p.Owner == name {
			ps = append(ps, p.Partition)
		}
	}
	return ps
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// count formats n with the singular or plural noun phrase.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// more says that there are more than one.
func more(n int) string {
	if n > 1 {
		return "; and others"
	}
	return ""
}

// secs formats d as seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
