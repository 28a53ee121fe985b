package store

// The statements of what operators are shown (package queue's Page,
// Throughput and Events; docs/ui.md): see migration 0014.

// InsightSQL are the statements of the jobs page, the per-minute outcome
// counts and the partition events (package queue).
type InsightSQL struct {
	// PageWalk, PageFailed and PageKey read one page of jobs (see
	// pageRows): walking the primary key, the failed jobs (jobs_failed) or
	// a key's pending jobs (jobs_key).
	PageWalk, PageFailed, PageKey string
	// Record adds Processors' outcome counts and fenced events; Prune
	// deletes the old ones; Throughput and Events read them.
	Record, Prune, Throughput, Events string
}

// The jobs page. Each form reads rows of its source, newest (highest id)
// first below $5 (NULL: from the top), in a MATERIALIZED CTE w whose
// bound ($8) holds whatever the filters match; then pageRows filters them
// by group $1, state $2, kind $3, partitions $4, batch $7 and key $9 (each
// when not NULL), keeps the first $6 matches, and reads their rows by
// primary key. Paging is by id only (keyset): no OFFSET, so a page deep in
// the table costs what the first one costs.
//
// Every row carries how many rows were read (scanned) and the Before of
// the next page (next; NULL: nothing older to read): when the page filled,
// the rows read up to its last job and that job's id; otherwise every row
// read, and where the walk stopped if rows are left below it (the form's
// rest). When nothing matches, one row is returned with the job's columns
// NULL. A CTE is read lazily: a page that fills reads w only up to its last
// match (m takes w's rows in w's order, id descending, and stops at $6),
// and the CASE reads the rest of w only when the page did not fill.
//
// The bound below $5, with coalesce rather than "$5 IS NULL OR", is an
// index condition, so the walk starts at $5.
func pageRows(rest string) string {
	return `,
m AS MATERIALIZED (
    SELECT w.id, w.n FROM w
    WHERE w.group_name = $1
      AND ($2::text IS NULL OR w.state = $2)
      AND ($3::text IS NULL OR w.kind = $3)
      AND ($4::int[] IS NULL OR w.partition = ANY($4))
      AND ($7::bigint IS NULL OR w.batch_id = $7)
      AND ($9::text IS NULL OR w.key = $9)
    LIMIT $6),
f AS MATERIALIZED (SELECT count(*) = $6 AS full, max(m.n) AS n, min(m.id) AS id FROM m),
s AS MATERIALIZED (
    SELECT CASE WHEN f.full THEN f.n ELSE (SELECT count(*) FROM w) END AS scanned,
           CASE WHEN f.full THEN f.id ELSE ` + rest + ` END AS next
    FROM f)
SELECT s.scanned, s.next, ` + jobColumns + `,
       NULL::bigint, NULL::text, NULL::timestamptz, NULL::bigint
FROM s LEFT JOIN (m JOIN {{schema}}.jobs AS j ON j.id = m.id) ON true
ORDER BY j.id DESC NULLS LAST`
}

// pageColumns are the columns of w that pageRows filters on, and each
// row's place in the walk (n, from 1).
const pageColumns = `j.id, j.group_name, j.state, j.kind, j.partition, j.batch_id, j.key,
           row_number() OVER (ORDER BY j.id DESC) AS n`

// insightPageWalk walks the primary key: any filter. It reads the jobs
// whose ids are among the $8 ids below the first job below $5: at most $8
// rows, fewer where ids were deleted or never used. The bound is a range
// of ids rather than a LIMIT so that the plan cannot be a sequential scan
// and a sort of the whole table, whatever the statistics say (a range of
// unknown bounds is estimated small: an index range scan); the first id
// (hi) is one index probe, which also skips the ids deleted below $5
// (retention) at once. The walk stops at lo; the next page starts there
// if any job is below it.
const insightPageWalk = `
WITH b AS MATERIALIZED (
    SELECT x.hi, x.hi - $8 AS lo FROM (
        SELECT (SELECT max(j.id) FROM {{schema}}.jobs AS j WHERE j.id < coalesce($5::bigint, 9223372036854775807)) + 1 AS hi) AS x),
w AS MATERIALIZED (
    SELECT ` + pageColumns + `
    FROM b JOIN {{schema}}.jobs AS j ON j.id < b.hi AND j.id >= b.lo
    ORDER BY j.id DESC)`

// insightPageFailed walks jobs_failed: the group's discarded and cancelled
// jobs ($2 is one of those states), at most $8.
const insightPageFailed = `
WITH w AS MATERIALIZED (
    SELECT ` + pageColumns + `
    FROM {{schema}}.jobs AS j
    WHERE j.group_name = $1 AND j.state IN ('discarded', 'cancelled')
      AND j.id < coalesce($5::bigint, 9223372036854775807)
    ORDER BY j.id DESC
    LIMIT $8)`

// insightPageKey walks jobs_key: the pending jobs of key $9 (not empty) in
// its partition $10, at most $8.
const insightPageKey = `
WITH w AS MATERIALIZED (
    SELECT ` + pageColumns + `
    FROM {{schema}}.jobs AS j
    WHERE j.group_name = $1 AND j.partition = $10 AND j.key = $9 AND j.key <> '' AND j.state = 'pending'
      AND j.id < coalesce($5::bigint, 9223372036854775807)
    ORDER BY j.id DESC
    LIMIT $8)`

// walkRest is the next page's start of insightPageWalk when its page did
// not fill: lo, if a job is below it (one index probe).
const walkRest = `(SELECT b.lo FROM b WHERE EXISTS (SELECT FROM {{schema}}.jobs AS j WHERE j.id < b.lo))`

// limitRest is the next page's start of the index walks (a LIMIT) when
// their page did not fill: the last id read, if they read all they may
// (rows may be left below it).
const limitRest = `(SELECT min(w.id) FROM w HAVING count(*) = $8)`

// insightRecord adds, in one statement, a Processor's outcome counts of
// the current minute (database clock): group $1[i], worker $2[i] (the
// member id), completed $3[i], retried $4[i], discarded $5[i], cancelled
// $6[i], snoozed $7[i], fenced $8[i]; and its fenced events: group $9[i],
// partition $10[i], owner $11[i], token $12[i], job $13[i]. Each Processor
// writes its own rows (worker), so Processors do not wait on each other.
const insightRecord = `
WITH ev AS (
    INSERT INTO {{schema}}.events (group_name, partition, kind, owner, token, job)
    SELECT g, p, 'fenced', o, t, j
    FROM unnest($9::text[], $10::int[], $11::text[], $12::bigint[], $13::bigint[]) AS e(g, p, o, t, j)
    RETURNING 1)
INSERT INTO {{schema}}.job_stats AS s (group_name, minute, worker, completed, retried, discarded, cancelled, snoozed, fenced)
SELECT u.g, date_trunc('minute', clock_timestamp()), u.w, u.c, u.r, u.d, u.x, u.z, u.f
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
     AS u(g, w, c, r, d, x, z, f)
CROSS JOIN (SELECT count(*) FROM ev) AS e
ON CONFLICT (group_name, minute, worker) DO UPDATE
SET completed = s.completed + excluded.completed, retried = s.retried + excluded.retried,
    discarded = s.discarded + excluded.discarded, cancelled = s.cancelled + excluded.cancelled,
    snoozed = s.snoozed + excluded.snoozed, fenced = s.fenced + excluded.fenced`

// insightPrune deletes the outcome counts of groups $1 older than an hour
// (through the primary key: group, then minute) and the events older than
// a day among the oldest $2 (through the primary key, from its low end:
// ids grow with time, so the old events are the first ones; a bounded
// walk, which a later prune continues).
const insightPrune = `
WITH st AS (
    DELETE FROM {{schema}}.job_stats
    WHERE group_name = ANY($1::text[]) AND minute < date_trunc('minute', clock_timestamp()) - interval '1 hour'
    RETURNING 1),
old AS MATERIALIZED (
    SELECT e.id, e.at FROM {{schema}}.events AS e ORDER BY e.id LIMIT $2),
ev AS (
    DELETE FROM {{schema}}.events AS e USING old
    WHERE e.id = old.id AND old.at < clock_timestamp() - interval '1 day'
    RETURNING 1)
SELECT (SELECT count(*) FROM st), (SELECT count(*) FROM ev)`

// insightThroughput sums the outcome counts of group $1 per minute, for the
// last $2 minutes up to the current one (database clock), oldest first,
// minutes without counts included (zeros); no row when the group does not
// exist.
const insightThroughput = `
WITH g AS (SELECT name FROM {{schema}}.groups WHERE name = $1),
c AS (SELECT date_trunc('minute', clock_timestamp()) AS now)
SELECT m.minute, coalesce(sum(s.completed), 0)::bigint, coalesce(sum(s.retried), 0)::bigint,
       coalesce(sum(s.discarded), 0)::bigint, coalesce(sum(s.cancelled), 0)::bigint,
       coalesce(sum(s.snoozed), 0)::bigint, coalesce(sum(s.fenced), 0)::bigint
FROM g CROSS JOIN c
CROSS JOIN generate_series(c.now - ($2::int - 1) * interval '1 minute', c.now, interval '1 minute') AS m(minute)
LEFT JOIN {{schema}}.job_stats AS s ON s.group_name = g.name AND s.minute = m.minute
GROUP BY m.minute
ORDER BY m.minute`

// insightEvents reads the newest $2 events of group $1, newest first,
// through events_group. The first row is the group's existence: a row with
// a NULL id when it exists (then its events), none when it does not.
const insightEvents = `
SELECT NULL::bigint, NULL::timestamptz, NULL::int, NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::bool, NULL::bigint
FROM {{schema}}.groups WHERE name = $1
UNION ALL (
SELECT e.id, e.at, e.partition, e.kind, e.owner, e.token, e.previous, e.abrupt, e.job
FROM {{schema}}.events AS e
WHERE e.group_name = $1
ORDER BY e.id DESC
LIMIT $2)`
