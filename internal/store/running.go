package store

// The statements of what is running now (package queue, docs/running.md):
// each partition's owner publishes the jobs it runs in the running table
// (see migration 0011).

// runningFresh is the condition that makes a running row r trustworthy: its
// token is the partition lease's current token and that lease is unexpired
// (database clock). A row left behind by an owner that crashed, or written
// by an older grant, fails it. The lease is found by primary key (its name
// is partition.LeaseName).
const runningFresh = `EXISTS (
    SELECT FROM {{schema}}.leases AS l
    WHERE l.name = 'partition/' || r.group_name || '/' || r.partition
      AND l.token = r.token AND l.expires_at > clock_timestamp())`

// runningPublish writes, in one statement, the running sets of the
// partitions whose set changed since their last publish: group $1[i],
// partition $2[i], the grant's token $3[i], its worker $4[i], its jobs
// $5[i] (a JSON array, empty when nothing runs) and the keys it holds back
// by limits $7[i] (a JSON array of queue.LimitedKey, empty when none; see
// migration 0018). A row is written only if
// the stored token is not newer: a stale owner's late publish changes
// nothing. It returns, among the jobs $6 the publisher runs, those that are
// cancelled: the fallback of the cancel notification (a job cancelled
// while its notification was missed, or cancelled with its batch), found by
// primary key (the state tested as in queueCompleteJobs), and how many rows
// it wrote. With $1 empty it writes nothing: a read of $6 only.
const runningPublish = `
WITH pub AS (
    INSERT INTO {{schema}}.running AS r (group_name, partition, token, worker, jobs, limited, updated_at)
    SELECT u.g, u.p, u.t, u.w, u.j, u.l, clock_timestamp()
    FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::jsonb[], $7::jsonb[]) AS u(g, p, t, w, j, l)
    ON CONFLICT (group_name, partition) DO UPDATE
    SET token = excluded.token, worker = excluded.worker, jobs = excluded.jobs, limited = excluded.limited,
        updated_at = excluded.updated_at
    WHERE r.token <= excluded.token
    RETURNING 1)
SELECT coalesce(ARRAY(
           SELECT j.id FROM {{schema}}.jobs AS j
           WHERE j.id = ANY($6::bigint[]) AND coalesce(j.state = 'cancelled', false)), '{}'),
       (SELECT count(*) FROM pub)`

// runningJobs lists the jobs running in group $1, as published in fresh
// rows (see runningFresh), that are still pending: partition, token,
// worker, when the row was written, the job's id, kind and start (the
// worker's clock), in partition and id order.
const runningJobs = `
SELECT r.partition, r.token, r.worker, r.updated_at, e.id, e.kind, e.started_at
FROM {{schema}}.running AS r
CROSS JOIN LATERAL jsonb_to_recordset(r.jobs) AS e(id bigint, kind text, started_at timestamptz)
JOIN {{schema}}.jobs AS j ON j.id = e.id AND coalesce(j.state = 'pending', false)
WHERE r.group_name = $1 AND ` + runningFresh + `
ORDER BY r.partition, e.id`

// runningOfJob is the part of queueInspect that says where job j runs: the
// worker, its start and the grant's token, from the fresh row of j's
// partition that lists j (one primary-key read); NULLs when j is not
// known to run.
const runningOfJob = `
LEFT JOIN LATERAL (
    SELECT r.worker, e.started_at, r.token
    FROM {{schema}}.running AS r
    CROSS JOIN LATERAL jsonb_to_recordset(r.jobs) AS e(id bigint, started_at timestamptz)
    WHERE r.group_name = j.group_name AND r.partition = j.partition AND e.id = j.id
      AND j.state = 'pending' AND ` + runningFresh + `
    LIMIT 1) AS run ON true`

// runningList is queueList for the pseudo-state running: the pending jobs of
// group $1 listed in fresh running rows, filtered by kind ($3), partitions
// ($4), batch ($7), key ($8) when not NULL and below id $5 when not NULL, newest first,
// at most $6, with where each runs. ($2, the state, is unused: it keeps
// queueList's parameters.) It reads only the group's running rows and
// their jobs by primary key.
const runningList = `
SELECT ` + jobColumns + `, NULL::bigint,
       r.worker, e.started_at, r.token
FROM {{schema}}.running AS r
CROSS JOIN LATERAL jsonb_to_recordset(r.jobs) AS e(id bigint, started_at timestamptz)
JOIN {{schema}}.jobs AS j ON j.id = e.id
WHERE r.group_name = $1 AND ` + runningFresh + `
  AND coalesce(j.state = 'pending', false) AND ($2::text IS NULL OR true)
  AND ($3::text IS NULL OR j.kind = $3)
  AND ($4::int[] IS NULL OR j.partition = ANY($4))
  AND ($5::bigint IS NULL OR j.id < $5)
  AND ($7::bigint IS NULL OR j.batch_id = $7)
  AND ($8::text IS NULL OR j.key = $8)
ORDER BY j.id DESC
LIMIT $6`

// runningLimited reads the keys held back by limits in group $1, as the
// owners published them in fresh rows (see runningFresh), in one row of
// four columns: the $2 keys with the most jobs waiting, as a JSON array of
// {"partition", "owner" (the worker), "token", "key", "kind", "limit", "waiting"}
// (busiest first, then by key and partition); the totals per limit, a JSON
// array of {"limit", "waiting", "keys"}; whether some partition listed $3
// keys or more (its snapshot was cut: the totals are lower bounds); and the
// limits the kinds' handlers declare (group_kinds.limits), a JSON array of
// {"kind", "limits"} in kind order. It reads only the group's running rows
// and kinds, whatever the number of jobs held back.
const runningLimited = `
WITH l AS MATERIALIZED (
    SELECT r.partition, r.worker, r.token, e.key, e.kind, e."limit", e.waiting,
           count(*) OVER (PARTITION BY r.partition) AS listed
    FROM {{schema}}.running AS r
    CROSS JOIN LATERAL jsonb_to_recordset(r.limited) AS e(key text, kind text, "limit" text, waiting bigint)
    WHERE r.group_name = $1 AND jsonb_typeof(r.limited) = 'array' AND ` + runningFresh + `)
SELECT
    (SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY t.waiting DESC, t.key, t.partition, t."limit"), '[]')
     FROM (SELECT partition, worker AS owner, token, key, kind, "limit", waiting FROM l
           ORDER BY waiting DESC, key, partition, "limit" LIMIT $2) AS t),
    (SELECT coalesce(jsonb_agg(jsonb_build_object('limit', t."limit", 'waiting', t.waiting, 'keys', t.keys)), '[]')
     FROM (SELECT "limit", sum(waiting) AS waiting, count(*) AS keys FROM l GROUP BY "limit") AS t),
    coalesce((SELECT bool_or(listed >= $3) FROM l), false),
    (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', k.kind, 'limits', k.limits) ORDER BY k.kind), '[]')
     FROM {{schema}}.group_kinds AS k WHERE k.group_name = $1 AND k.limits IS NOT NULL)`
