package store

// Creating a group records its partition count once; later members read it.
const partitionCreateGroup = `
INSERT INTO {{schema}}.groups (name, partitions) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`

const partitionGroupCount = `SELECT partitions FROM {{schema}}.groups WHERE name = $1`

// Join or heartbeat: extend this incarnation's membership, or take over a
// row whose previous incarnation expired. No row back: another live process
// uses the id. joined_at = heartbeat_at in the result means a (re)join; one
// timestamp is taken (clock_timestamp() differs between calls). A (re)join
// wakes the group's members on channel $5 in the same statement (delivered
// at commit): one round trip, not two.
const partitionHeartbeat = `
WITH c AS (SELECT clock_timestamp() AS t),
j AS (` + partitionUpsertMember + `)
SELECT j.joined, CASE WHEN j.joined THEN (SELECT 1 FROM pg_notify($5, $1)) END FROM j`

// partitionJoin is partitionHeartbeat for Start: it also checks that the
// group has $6 partitions, and joins nothing if not (no row back, as for a
// live twin: Start reads the count in the same round trip and tells them
// apart).
const partitionJoin = `
WITH c AS (SELECT clock_timestamp() AS t
           WHERE EXISTS (SELECT FROM {{schema}}.groups WHERE name = $1 AND partitions = $6)),
j AS (` + partitionUpsertMember + `)
SELECT j.joined, CASE WHEN j.joined THEN (SELECT 1 FROM pg_notify($5, $1)) END FROM j`

// partitionUpsertMember is the membership upsert of partitionHeartbeat and
// partitionJoin, from the timestamp c.t (no row in c: nothing happens).
const partitionUpsertMember = `
INSERT INTO {{schema}}.members AS m (group_name, id, incarnation, joined_at, heartbeat_at, expires_at)
SELECT $1, $2, $3, c.t, c.t, c.t + $4 * interval '1 microsecond' FROM c
ON CONFLICT (group_name, id) DO UPDATE
SET joined_at    = CASE WHEN m.incarnation = EXCLUDED.incarnation AND m.expires_at > EXCLUDED.heartbeat_at
                        THEN m.joined_at ELSE EXCLUDED.heartbeat_at END,
    incarnation  = EXCLUDED.incarnation,
    heartbeat_at = EXCLUDED.heartbeat_at,
    expires_at   = EXCLUDED.expires_at
WHERE m.incarnation = EXCLUDED.incarnation OR m.expires_at <= EXCLUDED.heartbeat_at
RETURNING m.joined_at = m.heartbeat_at AS joined`

// The membership row of one id: its incarnation, its last heartbeat and
// the seconds until it expires (negative once expired), on the database
// clock. $1 group, $2 id.
const partitionMember = `
SELECT incarnation, heartbeat_at, extract(epoch FROM expires_at - clock_timestamp())
FROM {{schema}}.members WHERE group_name = $1 AND id = $2`

// partitionLeave deletes this incarnation's membership and, if there was
// one, wakes the group's members on channel $4 in the same statement.
const partitionLeave = `
WITH d AS (DELETE FROM {{schema}}.members WHERE group_name = $1 AND id = $2 AND incarnation = $3 RETURNING 1)
SELECT count(pg_notify($4, $1)) FROM d`

// The live view: the group's partition count, its unexpired members, and
// how long until the first of the others expires (so a crash is noticed
// then, not at the next poll).
const partitionView = `
SELECT g.partitions,
       coalesce(array_agg(m.id ORDER BY m.id) FILTER (WHERE m.id IS NOT NULL), '{}'),
       extract(epoch FROM min(m.expires_at) FILTER (WHERE m.id <> $2) - clock_timestamp())
FROM {{schema}}.groups AS g
LEFT JOIN {{schema}}.members AS m ON m.group_name = g.name AND m.expires_at > clock_timestamp()
WHERE g.name = $1
GROUP BY g.partitions`

// One row per partition of the group, with its lease if it has one. A
// release sets expires_at = renewed_at (leaseRelease); a grant or renewal
// sets expires_at = renewed_at + TTL, TTL > 0.
const partitionStatus = `
SELECT p, l.owner, l.token, l.acquired_at, l.expires_at, coalesce(l.expires_at > clock_timestamp(), false),
       coalesce(l.expires_at = l.renewed_at, false)
FROM {{schema}}.groups AS g
CROSS JOIN LATERAL generate_series(0, g.partitions - 1) AS p
LEFT JOIN {{schema}}.leases AS l ON l.name = 'partition/' || g.name || '/' || p
WHERE g.name = $1
ORDER BY p`

const partitionMembers = `
SELECT id, incarnation, joined_at, heartbeat_at, expires_at, expires_at > clock_timestamp()
FROM {{schema}}.members WHERE group_name = $1 ORDER BY id`

const partitionGroups = `SELECT name FROM {{schema}}.groups ORDER BY name`

// JoinSettings sets, for the rest of the transaction, statement_timeout,
// lock_timeout and idle_in_transaction_session_timeout to $1
// milliseconds: a member's pool bounds each by its renew interval
// (DerivePool), right for renewals and heartbeats but not for Start's
// one-off group creation, which waits on a concurrent creator's commit and
// which a loaded server may take longer than a renew interval to run;
// Start's ctx bounds it instead.
const JoinSettings = `SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true), ` +
	`set_config('idle_in_transaction_session_timeout', $1, true)`

// partitionNotify wakes the members of group $2 on channel $1 (a join, a
// leave, releases). It names no table, so it needs no schema.
const partitionNotify = `SELECT pg_notify($1, $2)`
