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
// m takes one match more than the page ($6 + 1): when it finds it, more
// jobs match below the page, and the next page starts at the page's last
// job; otherwise w was read whole, and the next page starts where the
// form's walk stopped if rows may be left below it (the form's rest), or
// nowhere (NULL): a page is never followed by an empty last one.
//
// Every row carries how many rows were read (scanned) and the Before of
// the next page (next; NULL: nothing older to read): when a match beyond
// the page was found, the rows read up to it; otherwise every row read.
// When nothing matches, one row is returned with the job's columns NULL.
// A CTE is read lazily: m takes w's rows in w's order, id descending, and
// stops at its bound, so w is read only that far; the CASE reads the rest
// of w only when m did not fill.
//
// The bound below $5, with coalesce rather than "$5 IS NULL OR", is an
// index condition, so the walk starts at $5.
func pageRows(rest string) string {
	return `,
m AS MATERIALIZED (
    SELECT w.id, w.n, row_number() OVER () AS i FROM w
    WHERE w.group_name = $1
      AND ($2::text IS NULL OR w.state = $2)
      AND ($3::text IS NULL OR w.kind = $3)
      AND ($4::int[] IS NULL OR w.partition = ANY($4))
      AND ($7::bigint IS NULL OR w.batch_id = $7)
      AND ($9::text IS NULL OR w.key = $9)
    LIMIT $6 + 1),
f AS MATERIALIZED (
    SELECT count(*) > $6 AS more, max(m.n) AS n, max(m.id) FILTER (WHERE m.i = $6) AS id FROM m),
s AS MATERIALIZED (
    SELECT CASE WHEN f.more THEN f.n ELSE (SELECT count(*) FROM w) END AS scanned,
           CASE WHEN f.more THEN f.id ELSE ` + rest + ` END AS next
    FROM f)
SELECT s.scanned, s.next, ` + jobColumns + `,
       NULL::bigint, NULL::text, NULL::timestamptz, NULL::bigint
FROM s LEFT JOIN (m JOIN {{schema}}.jobs AS j ON j.id = m.id AND m.i <= $6) ON true
ORDER BY j.id DESC NULLS LAST`
}

// insightPageWalk walks the primary key: any filter. It reads the jobs
// whose ids are among the $8 ids below the first job below $5: at most $8
// rows, fewer where ids were deleted or never used. The bound is a range
// of ids rather than a LIMIT so that the plan cannot be a sequential scan
// and a sort of the whole table, whatever the statistics say; the first id
// (hi) is one index probe, which also skips the ids deleted below $5
// (retention) at once. The walk stops at lo; the next page starts there
// if any job is below it.
//
// The range is read in slices of walkSlice ids, one after the other (a
// nested loop over the slices, each an index range scan of at most
// walkSlice rows): rows come out in id order without a sort of the whole
// range, so a page that fills stops reading at its last match (a single
// range scan may be planned as a bitmap scan and a sort, which reads all
// of it first). row_number() OVER () numbers the rows in that order
// without sorting them.
const insightPageWalk = `
WITH b AS MATERIALIZED (
    SELECT x.hi, x.hi - $8 AS lo FROM (
        SELECT (SELECT max(j.id) FROM {{schema}}.jobs AS j WHERE j.id < coalesce($5::bigint, 9223372036854775807)) + 1 AS hi) AS x),
w AS MATERIALIZED (
    SELECT x.*, row_number() OVER () AS n
    FROM b CROSS JOIN generate_series(0, ($8::int - 1) / ` + walkSlice + `) AS s(k)
    CROSS JOIN LATERAL (
        SELECT j.id, j.group_name, j.state, j.kind, j.partition, j.batch_id, j.key
        FROM {{schema}}.jobs AS j
        WHERE j.id < b.hi - s.k * ` + walkSlice + ` AND j.id >= greatest(b.hi - (s.k + 1) * ` + walkSlice + `, b.lo)
        ORDER BY j.id DESC) AS x)`

// walkSlice is the ids insightPageWalk reads at a time.
const walkSlice = "100"

// indexWalk reads, newest first below $5, the jobs an index holds that
// match cond (conditions on j, the index's leading columns equal to
// parameters, its predicate implied), at most $8, in chunks of
// indexChunk: each chunk is the next indexChunk entries below the
// previous chunk's last id (a recursive CTE, one chunk per step, read
// only as far as the page needs it). A chunk's LIMIT is small, so the
// planner walks the index for it whatever its estimates (a single LIMIT
// of $8 over many matches may be planned as a bitmap scan and a sort of
// every match, which reads them all before the first row); and a bitmap
// plan of one chunk would still read no more than the matches of the
// index below the previous chunk, one chunk at a time being pulled. r
// numbers a chunk's rows: the last of a full chunk (r = indexChunk) starts
// the next one; a chunk not full is the last.
func indexWalk(cond string) string {
	chunk := func(below string) string {
		return `SELECT s.*, row_number() OVER () AS r FROM (
            SELECT j.id, j.group_name, j.state, j.kind, j.partition, j.batch_id, j.key
            FROM {{schema}}.jobs AS j
            WHERE ` + cond + ` AND j.id < ` + below + `
            ORDER BY j.id DESC
            LIMIT ` + indexChunk + `) AS s`
	}
	return `
WITH RECURSIVE c AS (
    ` + chunk("coalesce($5::bigint, 9223372036854775807)") + `
  UNION ALL
    SELECT x.* FROM c CROSS JOIN LATERAL (
        ` + chunk("c.id") + `) AS x
    WHERE c.r = ` + indexChunk + `),
w AS MATERIALIZED (
    SELECT c.id, c.group_name, c.state, c.kind, c.partition, c.batch_id, c.key, row_number() OVER () AS n
    FROM c
    LIMIT $8)`
}

// indexChunk is the index entries indexWalk reads at a time.
const indexChunk = "100"

// failedCond is what insightPageFailed reads: the group's jobs of state
// $2 (discarded or cancelled: the index's predicate, implied by the IN).
// The state is one of jobs_failed's columns, so the walk reads only the
// jobs of that state, however many of the other there are.
const failedCond = `j.group_name = $1 AND j.state = $2 AND j.state IN ('discarded', 'cancelled')`

// keyCond is what insightPageKey reads: the pending jobs of key $9 (not
// empty) in its partition $10, through jobs_key.
const keyCond = `j.group_name = $1 AND j.partition = $10 AND j.key = $9 AND j.key <> '' AND j.state = 'pending'`

// insightPageFailed and insightPageKey walk jobs_failed and jobs_key.
var (
	insightPageFailed = indexWalk(failedCond) + pageRows(indexRest(failedCond))
	insightPageKey    = indexWalk(keyCond) + pageRows(indexRest(keyCond))
)

// walkRest is the next page's start of insightPageWalk when its page did
// not fill: lo, if a job is below it (one index probe, from lo down: the
// low end of the index may hold many dead entries left by retention).
const walkRest = `(SELECT b.lo FROM b WHERE EXISTS (
    SELECT FROM (SELECT j.id FROM {{schema}}.jobs AS j WHERE j.id < b.lo ORDER BY j.id DESC LIMIT 1) AS x))`

// indexRest is the next page's start of an index walk on cond (see
// indexWalk) when m did not fill: the last id read, if the walk read all
// it may ($8) and the index holds a job below it (one index probe).
func indexRest(cond string) string {
	return `(SELECT min(w.id) FROM w HAVING count(*) = $8 AND EXISTS (
    SELECT FROM {{schema}}.jobs AS j WHERE ` + cond + ` AND j.id < min(w.id)))`
}

// insightRecord adds, in one statement, a Processor's outcome counts of
// the current minute (database clock): group $1[i], worker $2[i] (the
// member id), completed $3[i], retried $4[i], discarded $5[i], cancelled
// $6[i], snoozed $7[i], fenced $8[i]; and its fenced events: group $9[i],
// partition $10[i], owner $11[i], token $12[i], job $13[i]. Each Processor
// writes its own rows (worker), so Processors do not wait on each other.
// It returns the database clock, which times the Processor's prunes.
const insightRecord = `
WITH ev AS (
    INSERT INTO {{schema}}.events (group_name, partition, kind, owner, token, job)
    SELECT g, p, 'fenced', o, t, j
    FROM unnest($9::text[], $10::int[], $11::text[], $12::bigint[], $13::bigint[]) AS e(g, p, o, t, j)
    RETURNING 1),
st AS (
INSERT INTO {{schema}}.job_stats AS s (group_name, minute, worker, completed, retried, discarded, cancelled, snoozed, fenced)
SELECT u.g, date_trunc('minute', clock_timestamp()), u.w, u.c, u.r, u.d, u.x, u.z, u.f
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
     AS u(g, w, c, r, d, x, z, f)
CROSS JOIN (SELECT count(*) FROM ev) AS e
ON CONFLICT (group_name, minute, worker) DO UPDATE
SET completed = s.completed + excluded.completed, retried = s.retried + excluded.retried,
    discarded = s.discarded + excluded.discarded, cancelled = s.cancelled + excluded.cancelled,
    snoozed = s.snoozed + excluded.snoozed, fenced = s.fenced + excluded.fenced
RETURNING 1)
SELECT clock_timestamp() FROM (SELECT count(*) FROM st) AS x`

// insightPrune deletes the outcome counts of groups $1 older than an hour
// (through the primary key: group, then minute) and the events older than
// a day among the oldest $2 (through the primary key, from its low end:
// ids grow with time, so the old events are the first ones). It first
// probes the oldest event (one row, an uncorrelated EXISTS: an InitPlan
// whose result is a one-time filter, the clock being inside it): when it
// is younger than a day, nothing else of events is read, so a prune
// that finds nothing to delete costs a few buffers however many events
// are kept. It returns the rows deleted of each and the database clock;
// the Processor prunes again while a prune deletes $2 events (a full
// batch: more may be old), within a bound of time.
const insightPrune = `
WITH st AS (
    DELETE FROM {{schema}}.job_stats
    WHERE group_name = ANY($1::text[]) AND minute < date_trunc('minute', clock_timestamp()) - interval '1 hour'
    RETURNING 1),
old AS MATERIALIZED (
    SELECT e.id, e.at FROM {{schema}}.events AS e
    WHERE EXISTS (SELECT FROM (SELECT f.at FROM {{schema}}.events AS f ORDER BY f.id LIMIT 1) AS f
                  WHERE f.at < clock_timestamp() - interval '1 day')
    ORDER BY e.id LIMIT $2),
ev AS (
    DELETE FROM {{schema}}.events AS e USING old
    WHERE e.id = old.id AND old.at < clock_timestamp() - interval '1 day'
    RETURNING 1)
SELECT (SELECT count(*) FROM st), (SELECT count(*) FROM ev), clock_timestamp()`

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
