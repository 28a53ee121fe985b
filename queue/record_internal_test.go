package queue

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// stored reads the summed counts of group from job_stats.
func stored(t *testing.T, p *Processor, group string) (completed, fenced int64) {
	t.Helper()
	pgtest.Must(t, p.pool.QueryRow(pgtest.Context(t), `SELECT coalesce(sum(completed), 0)::bigint, coalesce(sum(fenced), 0)::bigint
		FROM leasehold.job_stats WHERE group_name = $1`, group).Scan(&completed, &fenced))
	return completed, fenced
}

// A write of the counts that fails keeps them for the next one: nothing is
// lost or counted twice. Nothing to write: no statement. Fenced events
// past maxFencedEvents between two writes are dropped, and counted
// anyway.
func TestTalliesSurviveAFailedWrite(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers(), PublishInterval: time.Hour})
	pgtest.Must(t, err)
	if n := p.writeTallies(ctx, false); n != 0 {
		t.Fatalf("nothing counted: %d statements; want none", n)
	}
	for range 5 {
		p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	}
	for i := range maxFencedEvents + 20 {
		p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Partition: 3, ID: int64(i + 1), Outcome: OutcomeFenced}, grant: &partition.Ownership{Group: "g", Partition: 3, Token: 9}})
	}
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeInterrupted}}) // not counted
	_, err = pool.Exec(ctx, `ALTER TABLE leasehold.job_stats RENAME TO job_stats_away`)
	pgtest.Must(t, err)
	if n := p.writeTallies(ctx, false); n != 1 {
		t.Fatalf("a failed write ran %d statements; want 1", n)
	}
	_, err = pool.Exec(ctx, `ALTER TABLE leasehold.job_stats_away RENAME TO job_stats`)
	pgtest.Must(t, err)
	if c, f := stored(t, p, "g"); c != 0 || f != 0 {
		t.Fatalf("the failed write stored %d completed, %d fenced", c, f)
	}
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx, false); n < 1 {
		t.Fatal("the next write ran no statement")
	}
	if c, f := stored(t, p, "g"); c != 6 || f != maxFencedEvents+20 {
		t.Errorf("stored %d completed, %d fenced; want 6 and %d", c, f, maxFencedEvents+20)
	}
	var events, first, last int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), min(job), max(job) FROM leasehold.events WHERE kind = 'fenced' AND token = 9 AND partition = 3`).
		Scan(&events, &first, &last))
	if events != maxFencedEvents || first != 1 || last != maxFencedEvents {
		t.Errorf("%d fenced events (jobs %d to %d); want the first %d", events, first, last, maxFencedEvents)
	}
	if n := p.writeTallies(ctx, false); n != 0 {
		t.Errorf("written already: %d statements; want none", n)
	}
}

// The first write of a Processor (and then one a minute) deletes counts
// older than an hour and events older than a day, and nothing newer.
func TestTalliesPruneOldRows(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO leasehold.job_stats (group_name, minute, worker, completed) VALUES
			('g', date_trunc('minute', now()) - interval '61 minutes', 'w', 1),
			('g', date_trunc('minute', now()) - interval '59 minutes', 'w', 2),
			('h', date_trunc('minute', now()) - interval '2 hours', 'w', 4);
		INSERT INTO leasehold.events (at, group_name, partition, kind, owner, token) VALUES
			(now() - interval '25 hours', 'g', 0, 'handoff', 'w', 1),
			(now() - interval '23 hours', 'g', 0, 'handoff', 'w', 2)`)
	pgtest.Must(t, err)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers(), PublishInterval: time.Hour})
	pgtest.Must(t, err)
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx, false); n != 2 {
		t.Fatalf("the first write ran %d statements; want 2 (the counts, the prune)", n)
	}
	var sum int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT sum(completed) FROM leasehold.job_stats`).Scan(&sum))
	if sum != 2+1+4 { // g's old minute gone; h is not this Processor's group: left
		t.Errorf("counts left sum to %d; want 7", sum)
	}
	var tokens []int64
	rows, err := pool.Query(ctx, `SELECT token FROM leasehold.events ORDER BY id`)
	pgtest.Must(t, err)
	for rows.Next() {
		var tok int64
		pgtest.Must(t, rows.Scan(&tok))
		tokens = append(tokens, tok)
	}
	if len(tokens) != 1 || tokens[0] != 2 {
		t.Errorf("events left: tokens %v; want [2]", tokens)
	}
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx, false); n != 1 {
		t.Errorf("a write within the minute ran %d statements; want 1 (no prune)", n)
	}
}

// A Processor's final write (its last run ending) does not prune, even
// when a prune is due: one statement, the old rows left for the next
// write, which prunes.
func TestTalliesFinalWriteDoesNotPrune(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	_, err := pool.Exec(ctx, `INSERT INTO leasehold.events (at, group_name, partition, kind, owner, token)
		VALUES (now() - interval '25 hours', 'g', 0, 'handoff', 'w', 1)`)
	pgtest.Must(t, err)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers(), PublishInterval: time.Hour})
	pgtest.Must(t, err)
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx, true); n != 1 {
		t.Errorf("the final write ran %d statements; want 1 (no prune)", n)
	}
	if c, _ := stored(t, p, "g"); c != 1 {
		t.Errorf("the final write stored %d completed; want 1", c)
	}
	events := func() (n int) {
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.events`).Scan(&n))
		return n
	}
	if n := events(); n != 1 {
		t.Errorf("%d events after the final write; want the old one left", n)
	}
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx, false); n != 2 || events() != 0 {
		t.Errorf("the next write ran %d statements, left %d events; want 2 (the counts, the prune), none", n, events())
	}
}

// A prune probes the oldest event first: when it is younger than a day,
// the prune reads nothing else of the events, a few buffers however many
// are kept (the control: with one old event at the low end, the same
// statement reads the oldest batch). When it finds old events, it deletes
// them all, batch after batch, not only the oldest batch, and none of the
// young ones.
func TestTalliesPruneProbesTheOldestEvent(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	const old, young = 2*pruneEvents + pruneEvents/2, 20_000
	_, err := pool.Exec(ctx, `
		INSERT INTO leasehold.events (at, group_name, partition, kind, owner, token)
		SELECT now() - interval '25 hours', 'g', 0, 'handoff', 'w', i FROM generate_series(1, $1) AS i;
		`, old)
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO leasehold.events (at, group_name, partition, kind, owner, token)
		SELECT now(), 'g', 0, 'handoff', 'w', i FROM generate_series(1, $1) AS i`, young)
	pgtest.Must(t, err)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers(), PublishInterval: time.Hour})
	pgtest.Must(t, err)
	p.tallies.pruneFor = time.Hour // the loaded machine's pace is not what is tested
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx, false); n != 1+3 {
		t.Errorf("the write ran %d statements; want 4 (the counts, three prunes of %d, %d and %d events)", n, pruneEvents, pruneEvents, pruneEvents/2)
	}
	var left, leftOld int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE at < now() - interval '1 day') FROM leasehold.events`).
		Scan(&left, &leftOld))
	if left != young || leftOld != 0 {
		t.Errorf("%d events left, %d of them old; want the %d young ones", left, leftOld, young)
	}

	cost := func() int {
		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		defer tx.Rollback(ctx)
		var plan string
		pgtest.Must(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+p.in.Prune, []string{"g"}, pruneEvents).Scan(&plan))
		var doc []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			} `json:"Plan"`
		}
		pgtest.Must(t, json.Unmarshal([]byte(plan), &doc))
		return doc[0].Plan.Hit + doc[0].Plan.Read
	}
	// The old events' dead rows at the low end of the primary key, as
	// vacuum leaves them (gone): until then, the probe steps over them.
	_, err = pool.Exec(ctx, `VACUUM leasehold.events`)
	pgtest.Must(t, err)
	none := cost()
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.events (id, at, group_name, partition, kind, owner, token)
		OVERRIDING SYSTEM VALUE VALUES (1, now() - interval '25 hours', 'g', 0, 'handoff', 'w', 0)`)
	pgtest.Must(t, err)
	control := cost()
	t.Logf("buffers of a prune with %d young events: %d; with an old one below them (control): %d", young, none, control)
	if none > 30 {
		t.Errorf("a prune with no old event touched %d buffers: it reads the events", none)
	}
	if control < 5*none+50 {
		t.Errorf("control: a prune with an old event touched %d buffers, with none %d: the measure cannot see the walk", control, none)
	}
}

// A fenced event names the owner and token of the run's own grant, not
// the member the group's counts are written under (the group's newest
// grant in this Processor).
func TestTalliesFencedEventOwnerIsTheRunsGrant(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	grant := func(owner string, part int) partition.Ownership {
		lc, err := lease.New(pgtest.DBOn(t, pool), lease.Config{Owner: owner})
		pgtest.Must(t, err)
		t.Cleanup(func() { lc.Close(context.Background()) })
		l, err := lc.TryAcquire(ctx, partition.LeaseName("g", part))
		pgtest.Must(t, err)
		return partition.Ownership{Group: "g", Partition: part, Token: l.Token(), Lease: l}
	}
	a, b := grant("a#1", 0), grant("b#1", 1)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers(), PublishInterval: time.Hour})
	pgtest.Must(t, err)
	p.tallies.serve(a)
	p.tallies.serve(b) // the group's counts now written under b
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Partition: 0, ID: 42, Outcome: OutcomeFenced}, grant: &a})
	p.writeTallies(ctx, true)
	var owner string
	var token int64
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT owner, token FROM leasehold.events WHERE kind = 'fenced' AND job = 42`).Scan(&owner, &token))
	if owner != "a" || token != int64(a.Token) {
		t.Errorf("fenced event of a's run: owner %q, token %d; want a, %d", owner, token, a.Token)
	}
}
