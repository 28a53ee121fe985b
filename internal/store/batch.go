package store

// Batches: see migration 0009 for the tables and the order in which
// statements lock their rows (items, then batch_counts, then the batch).

// batchCount is the data-modifying CTE body (named counted) that counts,
// in batch_counts, the state changes of batch items made by the CTE named
// changed of the statement it is part of, whose rows carry
// (batch_id, partition, state, was, item): the item's new and old state
// and whether the job is a batch item. Rows are written in (batch_id,
// partition) order. It returns each counter row written, with the items of
// its partition finished so far.
const batchCount = `
    INSERT INTO {{schema}}.batch_counts AS c (batch_id, partition, completed, failed, cancelled)
    SELECT s.batch_id, s.partition,
           count(*) FILTER (WHERE s.state = 'completed') - count(*) FILTER (WHERE s.was = 'completed'),
           count(*) FILTER (WHERE s.state = 'discarded') - count(*) FILTER (WHERE s.was = 'discarded'),
           count(*) FILTER (WHERE s.state = 'cancelled') - count(*) FILTER (WHERE s.was = 'cancelled')
    FROM changed AS s
    WHERE s.item AND s.state <> s.was
    GROUP BY s.batch_id, s.partition
    ORDER BY s.batch_id, s.partition
    ON CONFLICT (batch_id, partition) DO UPDATE
    SET completed = c.completed + excluded.completed,
        failed    = c.failed + excluded.failed,
        cancelled = c.cancelled + excluded.cancelled
    RETURNING c.batch_id, c.partition, c.completed + c.failed + c.cancelled AS finished`

// batchDrained is the CTE body (named drained) that selects, from the
// counter rows that counted (batchCount) wrote, the batches of which a partition has
// now finished every item added so far: only then can the batch have
// finished. The counter row is locked and current; the total may be older
// than this statement's snapshot (a producer adding meanwhile), and can
// only have grown, so a partition is never missed, only sometimes looked
// at too soon (batchFinish decides).
const batchDrained = `
    SELECT DISTINCT n.batch_id FROM counted AS n
    JOIN {{schema}}.batch_totals AS t ON t.batch_id = n.batch_id AND t.partition = n.partition
    WHERE n.finished >= t.total`

// batchCreate creates batch $2 of group $1 unless the group has one by that
// name; a row back (its id) means it was created.
const batchCreate = `
INSERT INTO {{schema}}.batches (group_name, name, description, on_complete, on_success)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (group_name, name) DO NOTHING
RETURNING id`

// batchSpec reads what batch $2 of group $1 was created with.
const batchSpec = `
SELECT id, description, on_complete, on_success FROM {{schema}}.batches WHERE group_name = $1 AND name = $2`

// batchKinds returns those of the kinds $2 that some worker of group $1
// has a handler for.
const batchKinds = `
SELECT kind FROM {{schema}}.group_kinds WHERE group_name = $1 AND kind = ANY($2::text[])`

// batchRegisterKinds records that a worker of group $1 has handlers for
// the kinds $2, which declare the limits $3 (a JSON object each; see
// migration 0018): a kind's limits are those its last recorder declared,
// and a row whose limits are unchanged is left alone.
const batchRegisterKinds = `
INSERT INTO {{schema}}.group_kinds AS g (group_name, kind, limits)
SELECT $1, u.k, u.l FROM unnest($2::text[], $3::jsonb[]) AS u(k, l) ORDER BY u.k
ON CONFLICT (group_name, kind) DO UPDATE SET limits = excluded.limits
WHERE g.limits IS DISTINCT FROM excluded.limits`

// batchLockAdd locks batch $2 of group $1 for a producer's chunk: FOR KEY
// SHARE, so that seal and cancel wait for the chunk, and finishing
// transactions do not. It returns the batch's id and whether it is sealed
// and cancelled.
const batchLockAdd = `
SELECT id, sealed_at IS NOT NULL, cancelled_at IS NOT NULL FROM {{schema}}.batches
WHERE group_name = $1 AND name = $2
FOR KEY SHARE`

// batchAdd adds items to batch $1 of group $2, in input order ($3
// partitions, $4 keys, $5 kinds, $6 args, $7 max attempts, $8 item keys,
// $9 holds, $11 priorities, $12 whether each max attempts was set by the
// producer, else the kind's policy may replace it), due now. An item whose key the batch has already is skipped.
// The totals of the partitions that got items grow; each is notified on
// channel $10 (at commit). It returns a row per item, in input order: its
// input ordinal and its new job's id (NULL: skipped, see batchConflicts).
const batchAdd = `
WITH t AS MATERIALIZED (
    SELECT nextval('{{schema}}.jobs_id_seq') AS id, p, k, kind, a, m, item, h, pr, ms, n
    FROM unnest($3::int[], $4::text[], $5::text[], $6::jsonb[], $7::int[], $8::text[], $9::bool[], $11::smallint[], $12::bool[])
         WITH ORDINALITY AS t(p, k, kind, a, m, item, h, pr, ms, n)
    ORDER BY n),
ins AS (
    INSERT INTO {{schema}}.jobs (id, group_name, partition, key, kind, args, max_attempts, run_at, holds, batch_id, batch_item,
                                 priority, max_attempts_set)
    OVERRIDING SYSTEM VALUE
    SELECT id, $2, p, k, kind, a, m, clock_timestamp(), h, $1, item, pr, ms FROM t ORDER BY n
    ON CONFLICT (batch_id, batch_item) WHERE batch_item IS NOT NULL DO NOTHING
    RETURNING id, partition),
tot AS (
    INSERT INTO {{schema}}.batch_totals AS b (batch_id, partition, total)
    SELECT $1, ins.partition, count(*) FROM ins GROUP BY ins.partition ORDER BY ins.partition
    ON CONFLICT (batch_id, partition) DO UPDATE SET total = b.total + excluded.total
    RETURNING b.partition),
woken AS (
    SELECT count(*) AS n FROM (SELECT pg_notify($10, tot.partition || ':' || $2) FROM tot) AS x)
SELECT t.n, ins.id FROM t LEFT JOIN ins ON ins.id = t.id CROSS JOIN woken ORDER BY t.n`

// batchConflicts compares items that batchAdd skipped ($2 item keys, $3
// kinds, $4 keys, $5 args) with the ones batch $1 has: it returns the
// first whose kind, key or args differ, with what is stored. Each item is
// one probe of jobs_batch_item (a LATERAL with a LIMIT): as a plain join,
// on a table never analysed, the planner read every item of the batch once
// per skipped item, so that a producer resuming a batch of N items spent
// N x SubmitChunk comparisons per chunk (batch_conflicts_test.go).
const batchConflicts = `
SELECT t.n, e.kind, e.key, e.args
FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[]) WITH ORDINALITY AS t(item, kind, k, a, n)
CROSS JOIN LATERAL (
    SELECT e.kind, e.key, e.args FROM {{schema}}.jobs AS e
    WHERE e.batch_id = $1 AND e.batch_item = t.item AND e.batch_item IS NOT NULL
    LIMIT 1) AS e
WHERE (e.kind, e.key, e.args) IS DISTINCT FROM (t.kind, t.k, t.a)
ORDER BY t.n
LIMIT 1`

// batchItemJobs returns the job ids of the items $2 of batch $1 (the item
// keys batchAdd skipped, in a new statement, which sees the items of
// producers that committed while batchAdd waited for them), each with its
// 1-based position in $2: one probe of jobs_batch_item per item.
const batchItemJobs = `
SELECT t.n, e.id
FROM unnest($2::text[]) WITH ORDINALITY AS t(item, n)
CROSS JOIN LATERAL (
    SELECT e.id FROM {{schema}}.jobs AS e
    WHERE e.batch_id = $1 AND e.batch_item = t.item AND e.batch_item IS NOT NULL
    LIMIT 1) AS e
ORDER BY t.n`

// batchLockName locks batch $2 of group $1 FOR UPDATE, after the
// producers' chunks in flight (FOR KEY SHARE), for batchSeal or
// batchCancel in a new statement, which sees every chunk committed before
// the lock was granted. It returns the batch's id.
const batchLockName = `
SELECT id FROM {{schema}}.batches WHERE group_name = $1 AND name = $2 FOR UPDATE`

// batchSeal seals batch $1, locked by batchLockName (sealing twice changes
// nothing). It returns true.
const batchSeal = `
UPDATE {{schema}}.batches SET sealed_at = coalesce(sealed_at, clock_timestamp()) WHERE id = $1
RETURNING true`

// batchCancel marks batch $1, locked by batchLockName, cancelled (and
// sealed), unless it is finished with no item pending (none retried
// since): cancelling that changes nothing. It returns whether the batch is
// cancelled.
const batchCancel = `
UPDATE {{schema}}.batches AS b
SET sealed_at = coalesce(b.sealed_at, clock_timestamp()), cancelled_at = coalesce(b.cancelled_at, clock_timestamp())
WHERE b.id = $1 AND NOT (b.finished_at IS NOT NULL AND
      (SELECT coalesce(sum(t.total), 0) FROM {{schema}}.batch_totals AS t WHERE t.batch_id = $1) <=
      (SELECT coalesce(sum(c.completed + c.failed + c.cancelled), 0) FROM {{schema}}.batch_counts AS c WHERE c.batch_id = $1))
RETURNING true`

// batchCancelItems cancels the pending items among the next $3 items of
// batch $1 after item key $2, in item key order (through jobs_batch_item:
// a whole cancel reads each item once), counting them as queueCancel
// does. It locks them in id order, as the owners' completions do (see
// Processor.completeFenced), so that the two never wait for each other in
// a cycle. It returns the last item key read (NULL: none left), how many
// items it read and cancelled, and the batches of which it cancelled a
// partition's last item.
const batchCancelItems = `
WITH s AS MATERIALIZED (
    SELECT j.id, j.batch_item FROM {{schema}}.jobs AS j
    WHERE j.batch_id = $1 AND j.batch_item IS NOT NULL AND j.batch_item > $2
    ORDER BY j.batch_item
    LIMIT $3),
lk AS MATERIALIZED (
    SELECT j.id FROM {{schema}}.jobs AS j
    WHERE j.id IN (SELECT s.id FROM s) AND coalesce(j.state = 'pending', false)
    ORDER BY j.id
    FOR UPDATE),
changed AS (
    UPDATE {{schema}}.jobs AS j
    SET state = 'cancelled', finished_at = clock_timestamp(),
        errors = j.errors || jsonb_build_array(jsonb_build_object(
                 'attempt', j.attempt, 'at', clock_timestamp(), 'error', 'batch cancelled by an operator'))
    FROM lk WHERE j.id = lk.id AND coalesce(j.state = 'pending', false)
    RETURNING j.batch_id, j.partition, j.state, 'pending'::text AS was, true AS item),
counted AS (` + batchCount + `),
drained AS (` + batchDrained + `)
SELECT (SELECT s.batch_item FROM s ORDER BY s.batch_item DESC LIMIT 1), (SELECT count(*) FROM s), (SELECT count(*) FROM changed),
       (SELECT array_agg(drained.batch_id ORDER BY drained.batch_id) FROM drained)`

// batchRetryItems puts the discarded items among the next $3 items of
// batch $1 after item key $2 back to pending, as queueRetry does, locking
// them in id order (see batchCancelItems), and notifies their partitions
// on channel $4 (group $5). It holds the batch row FOR KEY SHARE and
// changes nothing once the batch is cancelled, so that a CancelBatch
// (which takes the row FOR UPDATE) never runs beside it. It returns whether
// the batch is not cancelled, the last item key read (NULL: none left),
// how many items it read and retried.
const batchRetryItems = `
WITH b AS MATERIALIZED (
    SELECT id FROM {{schema}}.batches WHERE id = $1 AND cancelled_at IS NULL FOR KEY SHARE),
s AS MATERIALIZED (
    SELECT j.id, j.batch_item FROM {{schema}}.jobs AS j
    WHERE j.batch_id = (SELECT b.id FROM b) AND j.batch_item IS NOT NULL AND j.batch_item > $2
    ORDER BY j.batch_item
    LIMIT $3),
lk AS MATERIALIZED (
    SELECT j.id FROM {{schema}}.jobs AS j
    WHERE j.id IN (SELECT s.id FROM s) AND j.state = 'discarded'
    ORDER BY j.id
    FOR UPDATE),
changed AS (
    UPDATE {{schema}}.jobs AS j
    SET state = 'pending', attempt = 0, run_at = clock_timestamp(), finished_at = NULL, finished_token = NULL
    FROM lk WHERE j.id = lk.id AND j.state = 'discarded'
    RETURNING j.batch_id, j.partition, j.state, 'discarded'::text AS was, true AS item),
counted AS (` + batchCount + `),
w AS (
    SELECT count(*) FROM (SELECT pg_notify($4, p.partition || ':' || $5) FROM (SELECT DISTINCT changed.partition FROM changed) AS p) AS x)
SELECT EXISTS (SELECT FROM b), (SELECT s.batch_item FROM s ORDER BY s.batch_item DESC LIMIT 1), (SELECT count(*) FROM s),
       (SELECT count(*) FROM changed)
FROM (SELECT count(*) FROM counted) AS x CROSS JOIN w`

// batchLock locks the batches $1, in id order, FOR NO KEY UPDATE: a
// transaction that may have finished them takes it before batchFinish, so
// that finishing transactions run batchFinish one at a time, each seeing
// what the ones before it committed.
const batchLock = `
SELECT id FROM {{schema}}.batches WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE`

// batchFinish finishes the batches $1 that are sealed and have every item
// finished, in a new statement after batchLock (so its snapshot has every
// counter committed before the lock was granted): it enqueues each
// follow-up not enqueued before (on complete: once the batch finished; on
// success: once every item completed, never for a cancelled batch), due
// now, notifying its partition on channel $2, and records it on the batch.
// A second enqueue of a follow-up is impossible: it would violate
// jobs_batch_followup. It returns a row per batch it changed: its id, the
// follow-up jobs, and whether it finished and succeeded just now.
const batchFinish = `
WITH s AS MATERIALIZED (
    SELECT b.id, b.group_name, b.on_complete, b.on_success,
           b.finished_at IS NULL AS finishes,
           b.succeeded_at IS NULL AND b.cancelled_at IS NULL AND c.failed = 0 AND c.cancelled = 0 AS succeeds
    FROM {{schema}}.batches AS b
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(t.total), 0) AS total FROM {{schema}}.batch_totals AS t WHERE t.batch_id = b.id) AS t
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(c.completed), 0) AS completed, coalesce(sum(c.failed), 0) AS failed,
               coalesce(sum(c.cancelled), 0) AS cancelled
        FROM {{schema}}.batch_counts AS c WHERE c.batch_id = b.id) AS c
    WHERE b.id = ANY($1::bigint[]) AND b.sealed_at IS NOT NULL
      AND c.completed + c.failed + c.cancelled >= t.total),
f AS MATERIALIZED (
    SELECT s.id, s.group_name, w.which, w.spec
    FROM s CROSS JOIN LATERAL (VALUES ('complete', s.on_complete, s.finishes), ('success', s.on_success, s.succeeds))
         AS w(which, spec, due)
    WHERE w.due AND w.spec IS NOT NULL),
ins AS (
    INSERT INTO {{schema}}.jobs (group_name, partition, key, kind, args, max_attempts, run_at, holds, batch_id, followup,
                                 priority, max_attempts_set)
    SELECT f.group_name, (f.spec->>'partition')::int, f.spec->>'key', f.spec->>'kind', f.spec->'args',
           (f.spec->>'max_attempts')::int, clock_timestamp(), true, f.id, f.which,
           coalesce((f.spec->>'priority')::smallint, 1), NOT coalesce((f.spec->>'default_max')::bool, false)
    FROM f
    RETURNING id, group_name, partition, batch_id, followup),
up AS (
    UPDATE {{schema}}.batches AS b
    SET finished_at  = CASE WHEN s.finishes THEN clock_timestamp() ELSE b.finished_at END,
        succeeded_at = CASE WHEN s.succeeds THEN clock_timestamp() ELSE b.succeeded_at END,
        complete_job = coalesce(b.complete_job, (SELECT i.id FROM ins AS i WHERE i.batch_id = b.id AND i.followup = 'complete')),
        success_job  = coalesce(b.success_job, (SELECT i.id FROM ins AS i WHERE i.batch_id = b.id AND i.followup = 'success'))
    FROM s WHERE b.id = s.id AND (s.finishes OR s.succeeds)
    RETURNING b.id, b.complete_job, b.success_job),
woken AS (
    SELECT count(*) AS n FROM (
        SELECT pg_notify($2, d.partition || ':' || d.group_name)
        FROM (SELECT DISTINCT i.group_name, i.partition FROM ins AS i) AS d) AS x)
SELECT up.id, up.complete_job, up.success_job, s.finishes, s.succeeds
FROM up JOIN s ON s.id = up.id CROSS JOIN woken
ORDER BY up.id`

// batchColumns are the columns of a BatchInfo, read from batches b with
// the sums of its partitions' totals and counters and the database time.
const batchColumns = `
SELECT b.id, b.group_name, b.name, b.description, b.created_at, b.sealed_at, b.cancelled_at, b.finished_at,
       b.succeeded_at, coalesce(b.complete_job, 0), coalesce(b.success_job, 0),
       t.total, c.completed, c.failed, c.cancelled, clock_timestamp()
FROM {{schema}}.batches AS b
CROSS JOIN LATERAL (
    SELECT coalesce(sum(t.total), 0) AS total FROM {{schema}}.batch_totals AS t WHERE t.batch_id = b.id) AS t
CROSS JOIN LATERAL (
    SELECT coalesce(sum(c.completed), 0) AS completed, coalesce(sum(c.failed), 0) AS failed,
           coalesce(sum(c.cancelled), 0) AS cancelled
    FROM {{schema}}.batch_counts AS c WHERE c.batch_id = b.id) AS c`

// batchProgress reads batch $2 of group $1 with its progress: two index
// range reads of a row per partition, whatever the batch's size.
const batchProgress = batchColumns + `
WHERE b.group_name = $1 AND b.name = $2`

// batchByID reads batch $1, as batchProgress.
const batchByID = batchColumns + `
WHERE b.id = $1`

// batchNamed finds the groups that have a batch named $1.
const batchNamed = `
SELECT group_name FROM {{schema}}.batches WHERE name = $1 ORDER BY group_name`

// batchList reads the batches of group $1 (every group when NULL), newest
// first, below id $2 when not NULL (paging), at most $3.
const batchList = batchColumns + `
WHERE ($1::text IS NULL OR b.group_name = $1) AND ($2::bigint IS NULL OR b.id < $2)
ORDER BY b.id DESC
LIMIT $3`

// batchDeletable reads batch $1, locked by batchLockName: whether it is
// finished with no item pending (none retried since), as batchCancel
// tests it.
const batchDeletable = `
SELECT b.finished_at IS NOT NULL AND
       (SELECT coalesce(sum(t.total), 0) FROM {{schema}}.batch_totals AS t WHERE t.batch_id = $1) <=
       (SELECT coalesce(sum(c.completed + c.failed + c.cancelled), 0) FROM {{schema}}.batch_counts AS c WHERE c.batch_id = $1)
FROM {{schema}}.batches AS b WHERE b.id = $1`

// batchDelete deletes batch $1, locked by batchLockName and found
// deletable (batchDeletable): its items left (through jobs_batch_item),
// then its row, its totals and counters (ON DELETE CASCADE). Its
// follow-up jobs are left to retention. It returns how many items it
// deleted.
const batchDelete = `
WITH items AS (
    DELETE FROM {{schema}}.jobs AS j WHERE j.batch_id = $1 AND j.batch_item IS NOT NULL AND j.state <> 'pending'
    RETURNING 1),
b AS (
    DELETE FROM {{schema}}.batches WHERE id = $1 RETURNING id)
SELECT (SELECT count(*) FROM items) FROM b`

// batchMarkGone marks, among the $3 batches of group $1 finished longest
// ago (and more than $2 microseconds ago) whose items are not known to be
// gone, those with no item left (one probe of jobs_batch_item each): item
// retention probes them no more (see migration 0016). Rows locked by
// another are skipped. It returns how many it marked.
const batchMarkGone = `
WITH s AS MATERIALIZED (
    SELECT b.id FROM {{schema}}.batches AS b
    WHERE b.group_name = $1 AND b.finished_at IS NOT NULL AND b.items_gone_at IS NULL
      AND b.finished_at < (SELECT clock_timestamp() - $2 * interval '1 microsecond')
    ORDER BY b.finished_at
    LIMIT $3
    FOR NO KEY UPDATE SKIP LOCKED)
UPDATE {{schema}}.batches AS b SET items_gone_at = clock_timestamp()
FROM s WHERE b.id = s.id
  AND NOT EXISTS (SELECT FROM {{schema}}.jobs AS j WHERE j.batch_id = s.id AND j.batch_item IS NOT NULL)`

// batchRetain deletes at most $3 batches of group $1 (rows, totals and
// counters) whose items are gone (batchMarkGone) and that finished more
// than $2 microseconds ago, oldest first, through batches_retain; rows
// locked by another are skipped.
const batchRetain = `
DELETE FROM {{schema}}.batches
WHERE id IN (
    SELECT b.id FROM {{schema}}.batches AS b
    WHERE b.group_name = $1 AND b.items_gone_at IS NOT NULL
      AND b.finished_at < (SELECT clock_timestamp() - $2 * interval '1 microsecond')
    ORDER BY b.finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED)`
