package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/partition"
)

// tally fills the report from the database and checks the invariants.
func (d *demo) tally(ctx context.Context) error {
	r := &d.rep
	r.Jobs = int(d.prod.enqueued.Load())
	r.ExpectedBalance = d.prod.amount.Load()
	var completedWithEffect int
	err := d.pool.QueryRow(ctx, `
WITH e AS (SELECT job_id, count(*) AS n FROM `+d.schema+`.demo_ledger GROUP BY job_id),
     j AS (SELECT id, state FROM `+d.schema+`.jobs WHERE group_name = $1)
SELECT (SELECT count(*) FROM j WHERE state = 'completed'),
       (SELECT count(*) FROM j WHERE state = 'pending'),
       (SELECT count(*) FROM j JOIN e ON e.job_id = j.id WHERE j.state = 'completed'),
       (SELECT count(*) FROM e WHERE n > 1),
       (SELECT coalesce(sum(n), 0) FROM e),
       (SELECT coalesce(sum(e.n), 0) FROM e LEFT JOIN j ON j.id = e.job_id WHERE j.state IS DISTINCT FROM 'completed'),
       (SELECT coalesce(sum(amount), 0) FROM `+d.schema+`.demo_ledger)`, demoGroup).
		Scan(&r.Processed, &r.Pending, &completedWithEffect, &r.Duplicates, &r.Effects, &r.Stray, &r.Balance)
	if err != nil {
		return fmt.Errorf("demo: tally: %w", err)
	}
	r.Lost = r.Jobs - completedWithEffect - r.Pending

	// Per account, deposits in seq order; per partition, tokens never going
	// back (a write under an older grant after a newer one wrote is stale).
	err = d.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE seq <= prev_seq), count(*) FILTER (WHERE token < prev_token)
FROM (SELECT seq, lag(seq) OVER (PARTITION BY account ORDER BY n) AS prev_seq, token,
             max(token) OVER (PARTITION BY partition ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_token
      FROM `+d.schema+`.demo_ledger) AS s`).Scan(&r.OutOfOrder, &r.StaleWrites)
	if err != nil {
		return fmt.Errorf("demo: tally: %w", err)
	}

	rows, err := d.pool.Query(ctx, `SELECT worker, count(*) FROM `+d.schema+`.demo_ledger GROUP BY worker`)
	if err != nil {
		return fmt.Errorf("demo: tally: %w", err)
	}
	r.ByWorker = make(map[string]int)
	var w string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&w, &n}, func() error { r.ByWorker[w] = n; return nil }); err != nil {
		return fmt.Errorf("demo: tally: %w", err)
	}

	// The runs reported refused by the fence: confirmed when their deposit
	// (their job, worker and token) is not in the ledger.
	fenced := d.runs.fencedRuns()
	jobs, workers, tokens := make([]int64, len(fenced)), make([]string, len(fenced)), make([]int64, len(fenced))
	for i, f := range fenced {
		jobs[i], workers[i], tokens[i] = f.job, f.worker, int64(f.token)
	}
	rows, err = d.pool.Query(ctx, `
SELECT f.worker, EXISTS (SELECT FROM `+d.schema+`.demo_ledger AS l
                         WHERE l.job_id = f.job AND l.worker = f.worker AND l.token = f.token)
FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f (job, worker, token)`, jobs, workers, tokens)
	if err != nil {
		return fmt.Errorf("demo: tally: %w", err)
	}
	r.FencedByWorker = make(map[string]int)
	var applied bool
	if _, err := pgx.ForEachRow(rows, []any{&w, &applied}, func() error {
		if applied {
			r.FencedButApplied++
		} else {
			r.FencedRefused++
			r.FencedByWorker[w]++
		}
		return nil
	}); err != nil {
		return fmt.Errorf("demo: tally: %w", err)
	}

	// The partitions' lease history, recorded by the audit trigger.
	vs, err := history.Load(ctx, d.pool, demoSchema)
	if err != nil {
		return err
	}
	var parts []history.Version
	prefix := partition.LeaseName(demoGroup, 0)
	prefix = prefix[:len(prefix)-1]
	for _, v := range vs {
		if strings.HasPrefix(v.Name, prefix) {
			parts = append(parts, v)
		}
	}
	hr := history.Check(parts)
	r.Grants, r.TokenViolations = hr.Grants, hr.Violations
	r.Tokens = make(map[int][]int64)
	for name, gs := range history.Grants(parts) {
		p, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
		if err != nil {
			continue
		}
		for _, g := range gs {
			r.Tokens[p] = append(r.Tokens[p], g.Token)
		}
	}
	if r.TokenViolations == nil {
		r.TokenViolations = []string{}
	}
	r.Violations = r.violations()
	r.OK = len(r.Violations) == 0
	return nil
}
