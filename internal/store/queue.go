package store

// queueCreateGroup creates group $1 with $2 partitions unless it exists;
// a row back means it was created.
const queueCreateGroup = `
INSERT INTO {{schema}}.groups (name, partitions) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING true`

// queueGroups reads the partition counts of the groups named in $1.
const queueGroups = `SELECT name, partitions FROM {{schema}}.groups WHERE name = ANY($1::text[])`

// queueEnqueue inserts many jobs in one statement. Ids are drawn first, in input
// order (so a key's jobs get increasing ids), then the rows inserted; a job
// whose unique key is already pending in its group (or earlier in the same
// batch) is skipped. Each partition that received a job due now is notified
// on channel $9 (delivered at commit; one notification per partition per
// transaction), so its owner fetches at once instead of at its next poll,
// and so are the partitions $14 (payloads of earlier enqueues that
// committed without notifying); with $9 NULL, none is (the client notifies
// later). $10 says whether each
// job holds its key's later jobs while it waits (see migration 0006); $11
// the priorities, $12 whether max_attempts was set by the enqueuer (see
// migration 0010); $13 the trace carrier stored with every job of the
// statement (NULL: none; see migration 0013). The result has one row per
// input, by ordinality n, with its id, or NULL for a
// skipped duplicate.
const queueEnqueue = `
WITH t AS MATERIALIZED (
    SELECT nextval('{{schema}}.jobs_id_seq') AS id, g, p, k, kind, a, m, r, u, h, pr, ms, kl, n
    FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::int[], $7::timestamptz[], $8::text[], $10::bool[],
                $11::smallint[], $12::bool[], $15::smallint[])
         WITH ORDINALITY AS t(g, p, k, kind, a, m, r, u, h, pr, ms, kl, n)
    ORDER BY n),
ins AS (
    INSERT INTO {{schema}}.jobs (id, group_name, partition, key, kind, args, max_attempts, run_at, unique_key, holds, priority, max_attempts_set, trace, key_limit)
    OVERRIDING SYSTEM VALUE
    SELECT id, g, p, k, kind, a, m, coalesce(r, clock_timestamp()), u, h, pr, ms, $13::jsonb, kl FROM t ORDER BY n
    ON CONFLICT (group_name, unique_key) WHERE unique_key IS NOT NULL AND state = 'pending' AND NOT unique_released DO NOTHING
    RETURNING id, group_name, partition, run_at),
woken AS (
    SELECT count(*) AS partitions FROM (
        SELECT pg_notify($9, d.p)
        FROM (SELECT DISTINCT partition || ':' || group_name AS p FROM ins WHERE $9::text IS NOT NULL AND run_at <= clock_timestamp()
              UNION SELECT unnest($14::text[]) WHERE $9::text IS NOT NULL) AS d) AS x)
SELECT t.n, ins.id FROM t LEFT JOIN ins USING (id) CROSS JOIN woken ORDER BY t.n`

// queueReleaseUnique releases, in a transactional handler's transaction
// before it enqueues jobs with unique keys, the unique keys of the jobs
// it runs ($1) that are among those (group $2[i], unique key $3[i]), so
// that a job's successor can take its key (see migration 0008). The
// released jobs are completed by the same transaction, or it rolls back.
// Found by primary key; the state test as in queueCompleteJobs.
const queueReleaseUnique = `
UPDATE {{schema}}.jobs AS j SET unique_released = true
FROM unnest($2::text[], $3::text[]) AS u(g, k)
WHERE j.id = ANY($1::bigint[]) AND j.group_name = u.g AND j.unique_key = u.k
  AND NOT j.unique_released AND coalesce(j.state = 'pending', false)`

// queueEnqueuePlain is queueEnqueue for jobs none of which has a unique key: every
// row is inserted, so the ids map back to the inputs without a join, and no
// conflict check runs. $8 is the notification channel (NULL: none), $9
// the holds flags, $10 the priorities, $11 the max_attempts_set flags, $12
// the trace carrier (NULL: none), $13 the extra payloads to notify, $14
// the key limits (NULL: the kind's policy).
const queueEnqueuePlain = `
WITH t AS MATERIALIZED (
    SELECT nextval('{{schema}}.jobs_id_seq') AS id, g, p, k, kind, a, m, coalesce(r, clock_timestamp()) AS r, h, pr, ms, kl, n
    FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::int[], $7::timestamptz[], $9::bool[],
                $10::smallint[], $11::bool[], $14::smallint[])
         WITH ORDINALITY AS t(g, p, k, kind, a, m, r, h, pr, ms, kl, n)
    ORDER BY n),
ins AS (
    INSERT INTO {{schema}}.jobs (id, group_name, partition, key, kind, args, max_attempts, run_at, holds, priority, max_attempts_set, trace, key_limit)
    OVERRIDING SYSTEM VALUE
    SELECT id, g, p, k, kind, a, m, r, h, pr, ms, $12::jsonb, kl FROM t ORDER BY n),
woken AS (
    SELECT count(*) AS partitions FROM (
        SELECT pg_notify($8, d.p)
        FROM (SELECT DISTINCT p || ':' || g AS p FROM t WHERE $8::text IS NOT NULL AND r <= clock_timestamp()
              UNION SELECT unnest($13::text[]) WHERE $8::text IS NOT NULL) AS d) AS x)
SELECT t.n, t.id FROM t CROSS JOIN woken ORDER BY t.n`

// queueEnqueueOne is queueEnqueuePlain for one job, the common Enqueue:
// one row inserted with VALUES, its id drawn by the column's default, so
// that the plan is an insert and a result, not the arrays' unnesting,
// sorts and joins a batch needs (their start-up cost the server pays at
// every execution, about 130 µs a job here; see docs/queue.md). $1 to $12
// are the job's fields as in queueEnqueuePlain; $8 the channel (NULL:
// none). With a channel, the job's partition is notified if due now, and
// so are the partitions $13 (payloads of earlier enqueues that committed
// without notifying; see queue's notifier), in the same commit; $14 is the
// job's key limit (NULL: its kind's policy). It returns the job's id.
const queueEnqueueOne = `
WITH ins AS (
    INSERT INTO {{schema}}.jobs (group_name, partition, key, kind, args, max_attempts, run_at, holds, priority, max_attempts_set, trace, key_limit)
    VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, clock_timestamp()), $9, $10, $11, $12::jsonb, $14)
    RETURNING id, run_at <= clock_timestamp() AS due)
SELECT ins.id, CASE WHEN $8::text IS NOT NULL THEN (
    SELECT count(pg_notify($8, p)) FROM unnest(
        CASE WHEN ins.due THEN ARRAY[$2::int || ':' || $1::text] ELSE '{}'::text[] END || $13::text[]) AS p) END
FROM ins`

// queueFetch reads due jobs of the partitions of group $1 a member asks
// for, in one statement, without locks: only each partition's owner reads
// them. $2 are the partitions and $3 how many due jobs to look at in each
// (its window's room); $4 the ids the owner holds (fetched, not yet
// recorded: never returned again), each of partition $5[i]; $6 keys to
// skip (the owner knows they wait), each of partition $7[i]; $8 the paused
// kinds (see migration 0010): never returned. A key whose first job is of a
// paused kind waits behind it, returned as a waiting row with a wait of 0.
// The member runs this statement only while no kind of the group is paused
// ($8 empty); with kinds paused it runs queueFetchWalk, one partition at
// a time, whose walk past the paused kinds' due jobs is capped (here the
// walk would read a paused kind's whole due backlog at every fetch).
//
// Each partition is read as if alone (fetchWindow, fetchKeys): the held
// ids and skipped keys are grouped by partition first (r), so that each
// partition's probes compare with its own lists only, and a busy partition
// takes no room of another's.
//
// A keyless job is returned as soon as it is in its partition's window: it
// waits for no other job. For each key in a window, the statement reads the
// key's first pending jobs in id order (not held, and holding their place
// or due; as many as the window has of the key, through jobs_key), and
// returns the longest due prefix of that list: the key's consecutive due
// jobs, which the owner runs one at a time in id order. A key whose first
// such job is not due is returned as a row whose kind is empty (no job's
// is), naming that job (the one the key waits behind) and how long until it
// is due, so that the owner skips the key for a while.
//
// A partition's window is its first $3[i] due jobs in (priority, run_at, id)
// order (migration 0010): one probe of jobs_due per priority level (1 to
// 4), each in (run_at, id) order and at most $3[i] long, merged. A level
// without due jobs costs one index descent that finds nothing. Priority
// picks the window; it never reorders a key's jobs, which run in id order
// whatever their priorities.
//
// Its cost is bounded by the windows, the jobs held and the keys in the
// windows, never by a key's backlog, a low-priority backlog or a future one.
// Every step is a MATERIALIZED CTE or a LATERAL probe with its index named
// by its ORDER BY, so the plan needs no statistics. Rows come in
// (partition, priority, run_at, id) order, each with its partition's
// window size (scanned), its partition and its own key limit (0: none;
// migration 0018).
const queueFetch = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now),
` + fetchAsked + `,
w AS MATERIALIZED (
    SELECT r.partition, x.id, x.key, x.priority, x.run_at
    FROM r CROSS JOIN c CROSS JOIN LATERAL (
        SELECT y.id, y.key, y.priority, y.run_at
        FROM unnest('{1,2,3,4}'::smallint[]) AS l(priority) CROSS JOIN LATERAL (
            SELECT j.id, j.key, j.priority, j.run_at
            FROM {{schema}}.jobs AS j
            WHERE j.group_name = $1 AND j.partition = r.partition AND j.priority = l.priority AND j.state = 'pending'
              AND j.run_at <= c.now
              AND j.id <> ALL(r.held) AND j.key <> ALL(r.skip) AND j.kind <> ALL($8::text[])
            ORDER BY j.run_at, j.id
            LIMIT r.n) AS y
        ORDER BY y.priority, y.run_at, y.id
        LIMIT r.n) AS x),
` + fetchKeys + `ORDER BY 17, 14, 11, 1`

// fetchAsked is the part queueFetch and queueFetchWalk share before their
// windows: the partitions asked for (r), each with its window's room (n),
// its held ids and its skipped keys as arrays of their own.
const fetchAsked = `h AS MATERIALIZED (
    SELECT h.partition, array_agg(h.id) AS ids FROM unnest($4::bigint[], $5::int[]) AS h(id, partition) GROUP BY h.partition),
s AS MATERIALIZED (
    SELECT s.partition, array_agg(s.key) AS keys FROM unnest($6::text[], $7::int[]) AS s(key, partition) GROUP BY s.partition),
r AS MATERIALIZED (
    SELECT a.partition, a.n, coalesce(h.ids, '{}') AS held, coalesce(s.keys, '{}') AS skip
    FROM unnest($2::int[], $3::int[]) AS a(partition, n)
    LEFT JOIN h ON h.partition = a.partition LEFT JOIN s ON s.partition = a.partition)`

// queueFetchWalk is queueFetch for one partition ($2 and $3 of one
// element) while kinds of the group are paused ($8 not empty) or keys of
// the partition fill their share of the owner's window ($12 not empty):
// the member runs queueFetch otherwise, so the common path's statement and
// plan are untouched. Neither kind nor key is in jobs_due: filtering the
// paused kinds or the full keys inside each level's probe (as queueFetch
// does with $8) walks their whole due backlog at every fetch. Here each
// level's probe walks at most $9 rows of jobs_due, in (run_at, id) order,
// starting after the level's resume position ($10[l], $11[l]; NULL: from
// the start), and the paused kinds and full keys are filtered out of those
// rows only: the fetch's cost is bounded by $9 per level, whatever the
// paused or full backlogs.
//
// The full keys ($12) are the fair turns between keys (see docs/control.md):
// a key whose jobs fill its share of the window is walked past, so that the
// keys behind its backlog are found, and its own next jobs are read by
// key, through jobs_key: $13 are the keys to refill and $14 how many of
// their next jobs to read (the key probe, as for a key of the window).
//
// Besides queueFetch's rows, it returns one position row per level (kind
// empty, wait_us NULL, priority the level): holds false, id and run_at the
// level's new resume position (the last walked row before the first
// runnable one the window could not take; id 0: that was the first row
// walked, and the position stays); holds true when the level's walk
// reached its end with nothing left behind, with the last row walked (id
// 0: none walked). Always four (a reader counting rows can tell the jobs).
// scanned counts the window's jobs, as in queueFetch.
const queueFetchWalk = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now),
` + fetchAsked + `,
v AS MATERIALIZED (
    SELECT r.partition, x.id, x.key, x.priority, x.run_at, x.free, x.pos
    FROM r CROSS JOIN c CROSS JOIN unnest('{1,2,3,4}'::smallint[], $10::timestamptz[], $11::bigint[]) AS l(priority, at, after)
    CROSS JOIN LATERAL (
        SELECT j.id, j.key, j.priority, j.run_at, j.kind <> ALL($8::text[]) AND j.key <> ALL($12::text[]) AS free,
               row_number() OVER (ORDER BY j.run_at, j.id) AS pos
        FROM {{schema}}.jobs AS j
        WHERE j.group_name = $1 AND j.partition = r.partition AND j.priority = l.priority AND j.state = 'pending'
          AND j.run_at <= c.now
          AND (j.run_at, j.id) > (coalesce(l.at, '-infinity'::timestamptz), coalesce(l.after, 0))
          AND j.id <> ALL(r.held) AND j.key <> ALL(r.skip)
        ORDER BY j.run_at, j.id
        LIMIT $9) AS x),
w AS MATERIALIZED (
    SELECT v.partition, v.id, v.key, v.priority, v.run_at FROM v WHERE v.free
    ORDER BY v.priority, v.run_at, v.id
    LIMIT (SELECT r.n FROM r LIMIT 1)),
cut AS MATERIALIZED (
    SELECT v.priority, count(*) AS walked,
           min(v.pos) FILTER (WHERE v.free AND NOT EXISTS (SELECT FROM w WHERE w.id = v.id)) AS cut
    FROM v GROUP BY v.priority),
pos AS (
    SELECT v.id, v.run_at, v.priority, false AS exhausted
    FROM cut JOIN v ON v.priority = cut.priority
    WHERE v.pos = coalesce(cut.cut - 1, cut.walked) AND (cut.cut IS NOT NULL OR cut.walked = $9)
    UNION ALL
    SELECT coalesce(lv.id, 0), coalesce(lv.run_at, c.now), l.priority, true
    FROM c CROSS JOIN unnest('{1,2,3,4}'::smallint[]) AS l(priority) LEFT JOIN cut ON cut.priority = l.priority
    LEFT JOIN v AS lv ON lv.priority = l.priority AND lv.pos = cut.walked
    WHERE cut.priority IS NULL OR cut.cut IS NULL AND cut.walked < $9
    UNION ALL
    SELECT 0, c.now, cut.priority, false FROM cut CROSS JOIN c WHERE cut.cut = 1),
n AS MATERIALIZED (
    SELECT r.partition, (SELECT count(*) FROM w) AS scanned FROM r),
k AS MATERIALIZED (
    SELECT w.partition, w.key, count(*) AS n FROM w WHERE w.key <> '' GROUP BY w.partition, w.key
    UNION ALL
    SELECT r.partition, q.key, q.n FROM r CROSS JOIN unnest($13::text[], $14::int[]) AS q(key, n) WHERE q.key <> ''),
` + fetchProbes + `UNION ALL
SELECT pos.id, '', '', NULL, 0, 0, pos.run_at, pos.exhausted,
       NULL, (SELECT count(*) FROM w), pos.run_at, NULL, NULL, pos.priority::smallint, true, NULL, r.partition, 0::smallint
FROM pos CROSS JOIN r
ORDER BY 17, 14, 11, 1`

// fetchKeys is the part queueFetch and queueFetchWalk share, after their
// windows w: each key's probe (f), and the rows returned: the jobs that run
// (by primary key) and, for each key whose next job is not due, that job
// with how long until it is.
const fetchKeys = `n AS MATERIALIZED (
    SELECT w.partition, count(*) AS scanned FROM w GROUP BY w.partition),
k AS MATERIALIZED (
    SELECT w.partition, w.key, count(*) AS n FROM w WHERE w.key <> '' GROUP BY w.partition, w.key),
` + fetchProbes

// fetchProbes is the end of fetchKeys: each key of k probed for its first
// k.n pending jobs, and the rows returned.
const fetchProbes = `f AS MATERIALIZED (
    SELECT k.partition, k.key, e.id, e.run_at, e.run_at <= c.now AND e.kind <> ALL($8::text[]) AS due,
           bool_and(e.run_at <= c.now AND e.kind <> ALL($8::text[])) OVER (PARTITION BY k.partition, k.key ORDER BY e.id) AS runs,
           row_number() OVER (PARTITION BY k.partition, k.key ORDER BY e.id) AS pos
    FROM k JOIN r ON r.partition = k.partition CROSS JOIN c CROSS JOIN LATERAL (
        SELECT e.id, e.run_at, e.kind FROM {{schema}}.jobs AS e
        WHERE e.group_name = $1 AND e.partition = k.partition AND e.key = k.key AND e.key <> ''
          AND e.state = 'pending' AND e.id <> ALL(r.held) AND (e.holds OR e.run_at <= c.now)
        ORDER BY e.id
        LIMIT k.n) AS e),
ok AS (
    SELECT f.partition, f.id FROM f WHERE f.runs
    UNION ALL
    SELECT w.partition, w.id FROM w WHERE w.key = '')
SELECT j.id, j.key, j.kind, j.args, j.attempt, j.max_attempts, j.created_at, j.holds,
       NULL::bigint AS wait_us, n.scanned, j.run_at, j.batch_id, j.batch_item,
       j.priority, j.max_attempts_set, j.trace, ok.partition, coalesce(j.key_limit, 0)::smallint AS key_limit
FROM ok JOIN n ON n.partition = ok.partition CROSS JOIN LATERAL (
    SELECT * FROM {{schema}}.jobs AS j WHERE j.id = ok.id LIMIT 1) AS j -- LIMIT: a primary-key probe per row, never a join over the table
UNION ALL
SELECT f.id, f.key, '', NULL, 0, 0, f.run_at, false,
       greatest(0, (extract(epoch FROM f.run_at - c.now) * 1000000)::bigint), n.scanned, f.run_at,
       NULL, NULL, 32767::smallint, true, NULL, f.partition, 0::smallint
FROM f JOIN n ON n.partition = f.partition CROSS JOIN c WHERE f.pos = 1 AND NOT f.due
`

// queueFetchBefore12 is the fetch the pipeline replaced (issue 12), kept as the
// baseline of the fetch-cost test and of bench's explain suite, never run
// by the queue: a job waits while an earlier pending job of its key exists,
// checked for every candidate, so to return a key's head it walks the key's
// whole due backlog. $1 group, $2 partition, $3 limit.
const queueFetchBefore12 = `
SELECT j.id, j.key, j.kind, j.args, j.attempt, j.max_attempts, j.created_at
FROM {{schema}}.jobs AS j
WHERE j.group_name = $1 AND j.partition = $2 AND j.state = 'pending' AND j.run_at <= clock_timestamp()
  AND NOT EXISTS (
      SELECT FROM {{schema}}.jobs AS e
      WHERE e.group_name = j.group_name AND e.partition = j.partition AND e.key = j.key
        AND e.state = 'pending' AND e.id < j.id)
ORDER BY j.run_at, j.id
LIMIT $3`

// queueOpenRun records, for each i, grant $3[i] as the one running
// partition $2[i] of group $1 (see migration 0005), for the grants of a
// member that start together (a start, a rebalance) in one statement; a
// partition appears at most once. It returns, per partition, the token it
// found (NULL: no run was ever recorded), whether that run was still open
// (it ended abruptly), and whether $3[i] was recorded: a token lower than
// the recorded one changes nothing (a stale run's late start). A recorded
// grant newer than the previous one is also recorded as a handoff event
// (see migration 0014) of owner $4[i], with the previous token and whether
// its run ended abruptly: in this statement, so that it costs no round
// trip. The rows are locked in partition order, so that two members'
// statements cannot deadlock; all of them before the upsert changes any
// (up reads prev whole first: a row this statement updated before prev
// locked it would be skipped by FOR UPDATE, and its partition seem never
// run). Last, per partition, the recent starts of
// rate-limited keys the previous run handed over when it ended cleanly
// (NULL: none, or it ended abruptly; see migration 0018) and how many
// microseconds ago they were written.
const queueOpenRun = `
WITH a AS MATERIALIZED (
    SELECT a.partition, a.token, a.owner FROM unnest($2::int[], $3::bigint[], $4::text[]) AS a(partition, token, owner)),
prev AS MATERIALIZED (
    SELECT r.partition, r.token, r.open, r.rate, (extract(epoch FROM clock_timestamp() - r.closed_at) * 1000000)::bigint AS since
    FROM {{schema}}.queue_runs AS r
    WHERE r.group_name = $1 AND r.partition = ANY($2::int[])
    ORDER BY r.partition
    FOR UPDATE),
up AS (
    INSERT INTO {{schema}}.queue_runs AS r (group_name, partition, token, open)
    SELECT $1, a.partition, a.token, true FROM a CROSS JOIN (SELECT count(*) FROM prev) AS locked ORDER BY a.partition
    ON CONFLICT (group_name, partition) DO UPDATE SET token = excluded.token, open = true, rate = NULL, closed_at = NULL
    WHERE r.token <= excluded.token
    RETURNING r.partition),
ev AS (
    INSERT INTO {{schema}}.events (group_name, partition, kind, owner, token, previous, abrupt)
    SELECT $1, a.partition, 'handoff', a.owner, a.token, p.token, coalesce(p.open, false)
    FROM a JOIN up ON up.partition = a.partition LEFT JOIN prev AS p ON p.partition = a.partition
    WHERE coalesce(p.token < a.token, true)
    RETURNING 1)
SELECT a.partition, p.token, coalesce(p.open, false), EXISTS (SELECT FROM up WHERE up.partition = a.partition),
       CASE WHEN NOT p.open THEN p.rate END, coalesce(p.since, 0)
FROM a LEFT JOIN prev AS p ON p.partition = a.partition CROSS JOIN (SELECT count(*) FROM ev) AS x`

// queueCloseRun marks the runs of grants $3[i] of partitions $2[i] of
// group $1 as ended cleanly, for the grants of a member that end together
// in one statement; it changes nothing for a partition whose newer grant
// recorded its own. It locks the rows in partition order, as queueOpenRun
// does. $4[i] are the recent starts of the run's rate-limited keys (NULL:
// none), handed to the next owner (see queueOpenRun).
const queueCloseRun = `
UPDATE {{schema}}.queue_runs AS r SET open = false, rate = mine.rate, closed_at = clock_timestamp()
FROM (
    SELECT q.partition, c.rate
    FROM {{schema}}.queue_runs AS q
    JOIN unnest($2::int[], $3::bigint[], $4::jsonb[]) AS c(partition, token, rate) ON q.partition = c.partition AND q.token = c.token
    WHERE q.group_name = $1
    ORDER BY q.partition
    FOR UPDATE OF q
) AS mine
WHERE r.group_name = $1 AND r.partition = mine.partition`

// queueCompleteJobs records the outcomes of jobs: the UPDATE of queueComplete and
// queueCompleteFenced. A retry's delay is added to the database clock. Only
// pending jobs change: a job finished by anyone else is left alone (and not
// counted). An error is appended to the job's errors unless it repeats the
// last one with no attempt spent since (a job whose kind has no handler,
// looked at again); a recovered run's failure spends 0 here, its attempt
// having been spent before it, and is appended. Each outcome carries the
// token of the grant it was run under ($6[i], recorded as finished_token)
// and that grant's lease ($7[i], which the fenced forms check).
//
// The jobs are found by primary key. Their state is tested in a form
// (coalesce) from which the planner cannot prove state = 'pending', so that
// it cannot choose a pending-only partial index instead: with statistics
// taken when no job was pending (a drained table, or one truncated and
// refilled), it estimates such an index at one row and walks all of it,
// every pending job, for every completion (measured: 194 ms for 100 jobs
// with 200,000 pending, instead of about 1 ms).
const queueCompleteJobs = queueCompleteSet + `$9::bool[]` + queueCompleteWhere

// queueCompleteSet and queueCompleteWhere are queueCompleteJobs around its
// holds array: the new holds of each job (NULL: unchanged; see
// Policy.FailureHold in package queue). The queue passes NULL for the
// whole array unless a policy changes a job's holds, so the statement
// reads what it read before.
const queueCompleteSet = `
UPDATE {{schema}}.jobs AS j
SET state          = o.state,
    attempt        = j.attempt + o.spent,
    run_at         = CASE WHEN o.delay IS NULL THEN j.run_at
                     ELSE clock_timestamp() + o.delay * interval '1 microsecond' END,
    finished_at    = CASE WHEN o.state = 'pending' THEN NULL ELSE clock_timestamp() END,
    finished_token = CASE WHEN o.state = 'pending' THEN NULL ELSE o.token END,
    errors         = CASE WHEN o.error IS NULL THEN j.errors
                          WHEN o.spent = 0 AND j.errors->-1->>'error' = o.error
                               AND j.errors->-1->'attempt' = to_jsonb(j.attempt) THEN j.errors
                     ELSE j.errors || jsonb_build_array(jsonb_build_object(
                          'attempt', j.attempt + o.spent, 'at', clock_timestamp(), 'error', o.error)) END,
    holds          = coalesce(o.holds, j.holds)
FROM unnest($1::bigint[], $2::text[], $3::int[], $4::bigint[], $5::text[], $6::bigint[], $7::text[], `

const queueCompleteWhere = `) AS o(id, state, spent, delay, error, token, lease, holds)
WHERE j.id = o.id AND coalesce(j.state = 'pending', false)`

// queueComplete records the outcomes of jobs in one statement, without a fence:
// the benchmarks' raw-SQL limit runs it ($7 may be NULL). (The queue runs
// queueCompleteFenced.) It changes no job's holds.
const queueComplete = queueCompleteSet + `NULL::bool[]` + queueCompleteWhere

// queueCompleteFenced is queueComplete, fenced, as one statement, for the
// outcomes of any number of grants (a member's partitions): it locks the
// leases named in $7 FOR KEY SHARE, in name order (so no takeover of them
// can commit before this statement's transaction does; renewals need not
// wait), waiting at
// most $8 milliseconds for each lock, and changes each job only if its
// grant's lease ($7[i]) carries its grant's token ($6[i]) and is unexpired:
// a partition that lost its lease voids its own outcomes only. On its own
// it is its own transaction: one round trip instead of BEGIN, check,
// complete, COMMIT; in a transactional handler's transaction, the locks
// are held until that commits. It returns one row per lease found, with
// its name, token and liveness (a lease with no row does not exist), how
// many jobs changed in all, NULL (see queueCompleteItems), and the
// unapplied items (below). $9 are the new holds (see queueCompleteSet).
//
// It changes no batch item (batch_item IS NULL): those take
// queueCompleteItems, which counts them. An item's outcome handed to this
// statement is not applied, never finished uncounted, and is reported:
// the last column lists the pending batch items among $1 whose grant's
// lease is live (the outcomes it could have applied but must not; NULL
// when every outcome changed a job, so the common case reads nothing more),
// for the caller to apply through queueCompleteItems and report as a bug.
const queueCompleteFenced = `
WITH l AS MATERIALIZED (` + queueFenceLock + `),
changed AS (` + queueCompleteJobs + `
      AND j.batch_item IS NULL
      AND EXISTS (SELECT FROM l WHERE l.name = o.lease AND l.token = o.token AND l.live)
    RETURNING 1),
n AS MATERIALIZED (SELECT count(*) AS n FROM changed)
SELECT l.name, l.token, l.live, n.n, NULL::bigint[],
       CASE WHEN n.n < cardinality($1::bigint[]) THEN ARRAY(
           SELECT j.id FROM unnest($1::bigint[], $6::bigint[], $7::text[]) AS u(id, token, lease)
           JOIN {{schema}}.jobs AS j ON j.id = u.id
           WHERE j.batch_item IS NOT NULL AND coalesce(j.state = 'pending', false)
             AND EXISTS (SELECT FROM l AS k WHERE k.name = u.lease AND k.token = u.token AND k.live)
           ORDER BY j.id) END
FROM l CROSS JOIN n`

// queueCompleteItems is queueCompleteFenced for outcomes among which are
// batch items: it also counts the items it finishes in batch_counts (see
// batchCount), and returns, as its fifth column, the batches of which it
// finished a partition's last item (NULL: none): the caller then runs
// batchLock and batchFinish in the same transaction. Its sixth column is
// NULL (it applies every outcome it may).
const queueCompleteItems = `
WITH l AS MATERIALIZED (` + queueFenceLock + `),
changed AS (` + queueCompleteJobs + `
      AND EXISTS (SELECT FROM l WHERE l.name = o.lease AND l.token = o.token AND l.live)
    RETURNING j.batch_id, j.partition, j.state, 'pending'::text AS was, j.batch_item IS NOT NULL AS item),
counted AS (` + batchCount + `),
drained AS (` + batchDrained + `)
SELECT l.name, l.token, l.live, (SELECT count(*) FROM changed),
       (SELECT array_agg(drained.batch_id ORDER BY drained.batch_id) FROM drained), NULL::bigint[]
FROM l`

// queueFenceLock is the fence of queueCompleteFenced and queueCompleteItems:
// the lease rows named in $7, locked FOR KEY SHARE in name order within
// lock_timeout $8 (a fence since migration 15: see leaseCheck; fenceKey
// fails the statement on an older schema).
const queueFenceLock = `
    SELECT l.name, l.token, l.expires_at > clock_timestamp() AS live
    FROM (SELECT set_config('lock_timeout', $8, true), ` + fenceKey + `) AS settings, {{schema}}.leases AS l
    WHERE l.name = ANY($7::text[])
    ORDER BY l.name
    FOR KEY SHARE OF l`

// MemberSettings is what the member's statements that probe many
// partitions (the poll, retention) set for their transaction, in the same
// round trip: no JIT, and no sequential scan of the jobs. Statistics that
// no longer fit the table (a drained backlog, a table analysed while
// empty and filled since) can put a probe's estimate past jit_above_cost
// (compiling the plan then cost more than running it: 770 ms a fetch
// instead of 3.6 ms, measured), or make a sequential scan of jobs look free
// (analysed empty: the estimate is 0 rows), and a probe per partition and
// priority level then reads the whole table: polls at 144 ms, fetches at
// 17 ms instead of 0.1 ms in bench fleet, until the next autoanalyze. Each
// probe names its index by its ORDER BY, so no sequential scan is ever
// the better plan.
const MemberSettings = `SELECT set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true)`

// FetchSettings is MemberSettings for the fetch and poll statements, which also run
// on their prepared statement's generic plan (plan_cache_mode): planned
// once per connection, not at every call (see genericFetch in package
// queue). The generic plan is built under these settings too, so a table
// analysed while empty cannot fix a sequential scan into it.
const FetchSettings = `SELECT set_config('jit', 'off', true), set_config('enable_seqscan', 'off', true), ` +
	`set_config('plan_cache_mode', 'force_generic_plan', true)`

// CompleteSettings is FetchSettings for a completion statement in a
// transaction of its own: planned once per connection, without JIT and
// without a sequential scan of the jobs (its generic plan is built under
// these settings too).
const CompleteSettings = FetchSettings

// queueNotify notifies channel $1 once per payload of $2: the partitions
// whose enqueues were coalesced and carried by no later enqueue (see
// queue's notifier). It names no table, so it needs no schema.
const queueNotify = `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`

// queuePoll finds, among the partitions $2 of group $1 that a member owns,
// those whose earliest pending job is due within $3 microseconds: one
// statement per poll for all of them, instead of a fetch per partition. It
// returns each such partition with the microseconds until that job is due
// (0: due now), so that the member wakes the partitions with due jobs and
// polls again when the next one comes due, not a PollInterval later. Each
// partition costs one index descent of jobs_due per priority level (the
// first pending job of the level in run_at order), whatever its backlog.
const queuePoll = `
SELECT p.partition, greatest(0, (extract(epoch FROM x.run_at - c.now) * 1000000)::bigint) AS wait_us
FROM (SELECT clock_timestamp() AS now) AS c CROSS JOIN unnest($2::int[]) AS p(partition) CROSS JOIN LATERAL (
    SELECT min(y.run_at) AS run_at
    FROM unnest('{1,2,3,4}'::smallint[]) AS l(priority) CROSS JOIN LATERAL (
        SELECT j.run_at FROM {{schema}}.jobs AS j
        WHERE j.group_name = $1 AND j.partition = p.partition AND j.priority = l.priority AND j.state = 'pending'
        ORDER BY j.run_at
        LIMIT 1) AS y) AS x
WHERE x.run_at <= c.now + $3 * interval '1 microsecond'
ORDER BY p.partition`

// queueRetain deletes at most $4 jobs of partitions $2 of group $1 that
// finished more than $3 microseconds ago, oldest first in each partition,
// and returns how many it deleted: the member deletes in such chunks until
// one comes back
// short, so that no statement holds many row locks or writes much WAL at
// once. Batch items are left to queueRetainItems (jobs_finished leaves
// them out). The chunk is picked through jobs_finished and deleted by primary
// key, the conditions checked again (a job put back to pending meanwhile
// by Retry is left alone). The cutoff is computed once, in a subquery:
// compared with a volatile clock_timestamp() directly, finished_at could
// not bound the index scan, which then read every finished job of the
// partition (their heap rows included) on every round to find the old ones.
// Each partition is probed on its own (LATERAL, in finished_at order
// through jobs_finished), so that the scan reads old jobs only and stops
// at the chunk's size: one index descent per partition with none.
const queueRetain = `
DELETE FROM {{schema}}.jobs
WHERE id = ANY(ARRAY(
        SELECT f.id
        FROM unnest($2::int[]) AS p(partition) CROSS JOIN LATERAL (
            SELECT f.id FROM {{schema}}.jobs AS f
            WHERE f.group_name = $1 AND f.partition = p.partition AND f.state <> 'pending'
              AND f.finished_at < (SELECT clock_timestamp() - $3 * interval '1 microsecond') AND f.batch_item IS NULL
            ORDER BY f.finished_at
            LIMIT $4) AS f
        LIMIT $4))
  AND state <> 'pending' AND finished_at < clock_timestamp() - $3 * interval '1 microsecond'`

// queueRetainItems deletes, as queueRetain, at most $4 finished items of
// partitions $2 of the batches of group $1 that finished more than $3
// microseconds ago. Until its batch finished, an item is kept however old:
// a producer submitting the batch again must find it (its item key is what
// makes the second add a no-op). It probes (jobs_batch_finished) only the
// $5 batches finished longest ago whose items are not known to be gone
// (batches_retain_items; batchMarkGone marks them), so a round costs at
// most $5 probes per partition, whatever the number of batches ever run.
const queueRetainItems = `
DELETE FROM {{schema}}.jobs
WHERE id = ANY(ARRAY(
        SELECT f.id
        FROM (SELECT b.id FROM {{schema}}.batches AS b
              WHERE b.group_name = $1 AND b.finished_at IS NOT NULL AND b.items_gone_at IS NULL
                AND b.finished_at < (SELECT clock_timestamp() - $3 * interval '1 microsecond')
              ORDER BY b.finished_at
              LIMIT $5) AS b
        CROSS JOIN LATERAL (
            SELECT f.id FROM {{schema}}.jobs AS f
            WHERE f.batch_id = b.id AND f.partition = ANY($2::int[]) AND f.state <> 'pending' AND f.batch_item IS NOT NULL
            LIMIT $4) AS f
        LIMIT $4))
  AND state <> 'pending'`

// queueInspect reads one job, with the columns of queueList, and the job it waits
// behind: for a pending keyed job, the first earlier pending job of its key
// that holds its place or is due (NULL: none; the job is its key's next);
// then where it runs (see runningOfJob).
const queueInspect = `
SELECT ` + jobColumns + `,
       (SELECT e.id FROM {{schema}}.jobs AS e
        WHERE j.state = 'pending' AND j.key <> '' AND e.group_name = j.group_name AND e.partition = j.partition
          AND e.key = j.key AND e.key <> '' AND e.state = 'pending' AND e.id < j.id
          AND (e.holds OR e.run_at <= clock_timestamp())
        ORDER BY e.id LIMIT 1),
       run.worker, run.started_at, run.token
FROM {{schema}}.jobs AS j` + runningOfJob + `
WHERE j.id = $1`

// queueRetry puts finished-but-failed jobs (discarded or cancelled) back to
// pending, due now, with their attempts reset and their errors kept. A job
// whose unique key is pending again in its group is left alone; a retried
// job holds its unique key again (unique_released: see migration 8). The
// batch items it puts back are taken off batch_counts (see batchCount).
// A batch item whose batch is cancelled is never put back: if any of $1 is
// one (discarded or cancelled), nothing changes, and those ids are
// returned with refused true (else each changed id, refused false). The
// batches of the items are held FOR KEY SHARE first, as batchRetryItems
// does, so that a CancelBatch never runs beside it.
const queueRetry = `
WITH b AS MATERIALIZED (
    SELECT b.id, b.cancelled_at IS NOT NULL AS cancelled FROM {{schema}}.batches AS b
    WHERE b.id IN (SELECT j.batch_id FROM {{schema}}.jobs AS j
                   WHERE j.id = ANY($1::bigint[]) AND j.batch_item IS NOT NULL AND j.state IN ('discarded', 'cancelled'))
    ORDER BY b.id
    FOR KEY SHARE),
refused AS MATERIALIZED (
    SELECT j.id FROM {{schema}}.jobs AS j JOIN b ON b.id = j.batch_id
    WHERE j.id = ANY($1::bigint[]) AND j.batch_item IS NOT NULL AND j.state IN ('discarded', 'cancelled') AND b.cancelled),
o AS MATERIALIZED (
    SELECT j.id, j.state FROM {{schema}}.jobs AS j
    WHERE j.id = ANY($1::bigint[]) AND j.state IN ('discarded', 'cancelled') AND NOT EXISTS (SELECT FROM refused)
    ORDER BY j.id
    FOR UPDATE),
changed AS (
    UPDATE {{schema}}.jobs AS j
    SET state = 'pending', attempt = 0, run_at = clock_timestamp(), finished_at = NULL, finished_token = NULL,
        unique_released = false
    FROM o
    WHERE j.id = o.id
      AND NOT (j.unique_key IS NOT NULL AND EXISTS (
          SELECT FROM {{schema}}.jobs AS u
          WHERE u.group_name = j.group_name AND u.unique_key = j.unique_key AND u.state = 'pending'
            AND NOT u.unique_released))
    RETURNING j.id, j.batch_id, j.partition, j.state, o.state AS was, j.batch_item IS NOT NULL AS item),
counted AS (` + batchCount + `)
SELECT changed.id, false FROM changed CROSS JOIN (SELECT count(*) FROM counted) AS x
UNION ALL
SELECT refused.id, true FROM refused`

// queueStats counts the pending jobs of every partition of group $1, idle
// partitions included (no rows at all: the group does not exist). It reads
// only pending jobs, through the jobs_due partial index and their heap rows
// (for attempt), so its cost follows the backlog, never the retained
// finished jobs. One database time t splits due from scheduled jobs;
// oldest_us is the age of the oldest due job's run_at, in microseconds.
const queueStats = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS t),
s AS (
    SELECT j.partition,
           count(*) FILTER (WHERE j.run_at <= c.t)  AS due,
           count(*) FILTER (WHERE j.run_at > c.t)   AS scheduled,
           count(*) FILTER (WHERE j.attempt > 0)    AS retrying,
           min(j.run_at) FILTER (WHERE j.run_at <= c.t) AS oldest
    FROM {{schema}}.jobs AS j, c
    WHERE j.group_name = $1 AND j.state = 'pending'
    GROUP BY j.partition)
SELECT p, coalesce(s.due, 0), coalesce(s.scheduled, 0), coalesce(s.retrying, 0),
       coalesce((extract(epoch FROM c.t - s.oldest) * 1000000)::bigint, 0)
FROM {{schema}}.groups AS g
CROSS JOIN c
CROSS JOIN LATERAL generate_series(0, g.partitions - 1) AS p
LEFT JOIN s ON s.partition = p
WHERE g.name = $1
ORDER BY p`

// queueCancel finishes pending jobs as cancelled, recording why. It leaves
// finished_token NULL: no grant finished them. A job whose completion is in
// flight (an owner's transaction holding the job's row) is waited for, then left
// alone if that completion finished it. It counts the batch items it
// cancels (see batchCount) and returns the ids it changed, each with the
// batches of which it cancelled a partition's last item (the same array on
// every row; NULL: none), for batchLock and batchFinish in the same
// transaction. The owners of the cancelled jobs are notified on channel $2
// at commit, once per partition and CancelNotifyChunk ids
// ("cancel:<partition>:<id>,<id>,...:<group>", at most about 6.1kB, below
// the 8000-byte payload limit), so that they cancel the jobs' handlers if
// they run them, or drop them if they hold them (see docs/running.md).
// cancelNotifyChunk is CancelNotifyChunk in SQL.
const cancelNotifyChunk = "300"

// CancelNotifyChunk is the most job ids one cancel notification names: 300
// ids of at most 20 bytes each, with a group name of at most 100 bytes,
// stay well below PostgreSQL's 8000-byte payload limit.
const CancelNotifyChunk = 300

const queueCancel = `
WITH changed AS (
    UPDATE {{schema}}.jobs
    SET state = 'cancelled', finished_at = clock_timestamp(),
        errors = errors || jsonb_build_array(jsonb_build_object(
                 'attempt', attempt, 'at', clock_timestamp(), 'error', 'cancelled by an operator'))
    WHERE id = ANY($1::bigint[]) AND coalesce(state = 'pending', false) -- by primary key: see queueCompleteJobs
    RETURNING id, group_name, batch_id, partition, state, 'pending'::text AS was, batch_item IS NOT NULL AS item),
counted AS (` + batchCount + `),
drained AS (` + batchDrained + `),
notified AS (
    SELECT count(pg_notify($2, 'cancel:' || c.partition || ':' || c.ids || ':' || c.group_name)) AS n
    FROM (SELECT r.group_name, r.partition, string_agg(r.id::text, ',' ORDER BY r.id) AS ids
          FROM (SELECT changed.group_name, changed.partition, changed.id,
                       (row_number() OVER (PARTITION BY changed.group_name, changed.partition ORDER BY changed.id) - 1) / ` + cancelNotifyChunk + ` AS chunk
                FROM changed) AS r
          GROUP BY r.group_name, r.partition, r.chunk) AS c)
SELECT changed.id, (SELECT array_agg(drained.batch_id ORDER BY drained.batch_id) FROM drained)
FROM changed CROSS JOIN notified`

// queueList reads the jobs of group $1, newest first, filtered by state ($2),
// kind ($3), partitions ($4), batch ($7) and key ($8) when not NULL, below id $5 when
// not NULL (paging), at most $6. The plan walks the primary key from the newest id,
// filtering, until the limit is reached: cheap when matches are common
// among recent jobs, a scan of the group's jobs when nothing matches.
const queueList = `
SELECT ` + listColumns + `
FROM {{schema}}.jobs AS j
WHERE group_name = $1
  AND ($2::text IS NULL OR state = $2)
  AND ($3::text IS NULL OR kind = $3)
  AND ($4::int[] IS NULL OR partition = ANY($4))
  AND ($5::bigint IS NULL OR id < $5)
  AND ($7::bigint IS NULL OR batch_id = $7)
  AND ($8::text IS NULL OR key = $8)
ORDER BY id DESC
LIMIT $6`

// jobColumns are a job's own columns as queue.scanJob reads them first
// (21 of its 25), from the jobs table aliased j: every statement that
// reads jobs for scanJob (queueInspect, queueList, queueByKind,
// runningList) selects them, then its own 4 (the job it waits behind, and
// where it runs), so that the lists cannot drift apart.
const jobColumns = `j.id, j.group_name, j.partition, j.key, j.kind, j.args, j.state, j.attempt, j.max_attempts, j.run_at,
       j.created_at, j.finished_at, j.finished_token, j.errors, coalesce(j.unique_key, ''), j.holds,
       coalesce(j.batch_id, 0), coalesce(j.batch_item, ''), coalesce(j.followup, ''), j.priority, j.max_attempts_set`

// listColumns are the columns of queueList (and of queueByKind), from the
// jobs table aliased j, as queue.scanJob reads them; no job is waited
// behind (List leaves WaitingBehind 0), and none is known to be running
// (JobInfo.Running: the running list reads its own).
const listColumns = jobColumns + `,
       NULL::bigint, NULL::text, NULL::timestamptz, NULL::bigint`

// queueWaits lists the keys of group $1 whose next job waits (a job holding its
// place, scheduled for later, retrying or snoozed) while later jobs of the
// key are due: the job they wait behind, when it is due, its attempts, and
// how many due jobs wait behind it; at most $2, the most held up first. It
// walks the group's pending keyed jobs once, through jobs_key, so its cost
// follows the keyed backlog (like queueStats).
const queueWaits = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now),
heads AS MATERIALIZED (
    SELECT DISTINCT ON (j.partition, j.key) j.id, j.partition, j.key, j.run_at, j.attempt
    FROM {{schema}}.jobs AS j CROSS JOIN c
    WHERE j.group_name = $1 AND j.state = 'pending' AND j.key <> '' AND (j.holds OR j.run_at <= c.now)
    ORDER BY j.partition, j.key, j.id)
SELECT h.id, h.partition, h.key, h.run_at, h.attempt, b.n
FROM heads AS h CROSS JOIN c CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM {{schema}}.jobs AS e
    WHERE e.group_name = $1 AND e.partition = h.partition AND e.key = h.key AND e.key <> ''
      AND e.state = 'pending' AND e.id > h.id AND e.run_at <= c.now) AS b
WHERE h.run_at > c.now AND b.n > 0
ORDER BY b.n DESC, h.id
LIMIT $2`
