package queue

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
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
	if n := p.writeTallies(ctx); n != 0 {
		t.Fatalf("nothing counted: %d statements; want none", n)
	}
	for range 5 {
		p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	}
	for i := range maxFencedEvents + 20 {
		p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Partition: 3, ID: int64(i + 1), Outcome: OutcomeFenced}, token: 9})
	}
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeInterrupted}}) // not counted
	_, err = pool.Exec(ctx, `ALTER TABLE leasehold.job_stats RENAME TO job_stats_away`)
	pgtest.Must(t, err)
	if n := p.writeTallies(ctx); n != 1 {
		t.Fatalf("a failed write ran %d statements; want 1", n)
	}
	_, err = pool.Exec(ctx, `ALTER TABLE leasehold.job_stats_away RENAME TO job_stats`)
	pgtest.Must(t, err)
	if c, f := stored(t, p, "g"); c != 0 || f != 0 {
		t.Fatalf("the failed write stored %d completed, %d fenced", c, f)
	}
	p.tallies.count(&event{JobEvent: JobEvent{Group: "g", Outcome: OutcomeCompleted}})
	if n := p.writeTallies(ctx); n < 1 {
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
	if n := p.writeTallies(ctx); n != 0 {
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
	if n := p.writeTallies(ctx); n != 2 {
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
	if n := p.writeTallies(ctx); n != 1 {
		t.Errorf("a write within the minute ran %d statements; want 1 (no prune)", n)
	}
}
