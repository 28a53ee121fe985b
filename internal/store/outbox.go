package store

// outboxAppend appends records to the outbox of group $1's partition $2 in
// the calling (fenced) transaction, stamped with its scope $7: $3 topics,
// $4 keys, $5 values, $6 encoded headers (parallel arrays, in order).
const outboxAppend = `
INSERT INTO {{schema}}.outbox_records (group_name, partition, scope, topic, key, value, headers)
SELECT $1, $2, $7, t, k, v, h
FROM unnest($3::text[], $4::bytea[], $5::bytea[], $6::bytea[]) WITH ORDINALITY AS r(t, k, v, h, n)
ORDER BY n`

// outboxSeal makes the records scope $5 appended to group $1's partition $2
// one segment: the partition's next sequence number, taken under the head
// row's lock (held until COMMIT, so segments are numbered in commit order,
// without gaps). $3 records appended, $4 token. It returns the segment's
// sequence number.
const outboxSeal = `
WITH h AS (
    INSERT INTO {{schema}}.outbox_heads AS h (group_name, partition, next_seq) VALUES ($1, $2, 2)
    ON CONFLICT (group_name, partition) DO UPDATE SET next_seq = h.next_seq + 1
    RETURNING next_seq - 1 AS seq)
INSERT INTO {{schema}}.outbox_segments (group_name, partition, seq, scope, records, token, committed_at)
SELECT $1, $2, h.seq, $5, $3, $4, clock_timestamp() FROM h
RETURNING seq`

// outboxHead returns, for group $1's partition $2: the last sequence number
// given to a segment (0: none), the outbox's identity, why the relay was
// refused (NULLs without a head row), whether a refusal was cleared and not
// yet followed by progress of this outbox's own (adopt), and the age in
// microseconds of the oldest segment left unpublished (not deleted; NULL:
// none) on the database's clock.
const outboxHead = `
SELECT coalesce(h.next_seq - 1, 0), h.id::text, h.refused, coalesce(h.adopt, false),
       (SELECT (extract(epoch FROM clock_timestamp() - s.committed_at) * 1e6)::bigint
        FROM {{schema}}.outbox_segments s WHERE s.group_name = $1 AND s.partition = $2
        ORDER BY s.seq LIMIT 1)
FROM (SELECT 1) AS one
LEFT JOIN {{schema}}.outbox_heads h ON h.group_name = $1 AND h.partition = $2`

// outboxRefuse records why the relay refuses to publish group $1's
// partition $2 ($3), unless a refusal is recorded already; the relay stays
// stopped until it is cleared (outboxClear).
const outboxRefuse = `
UPDATE {{schema}}.outbox_heads SET refused = $3, refused_at = clock_timestamp()
WHERE group_name = $1 AND partition = $2 AND refused IS NULL`

// outboxClear clears the refusal of group $1's partition $2 (all of the
// group's partitions when $2 is NULL), the relay then adopting the
// partition (see migration 0017's adopt) under a new identity (so that no
// progress written before, whatever its numbers, is taken for this
// outbox's), and returns the partitions cleared.
const outboxClear = `
UPDATE {{schema}}.outbox_heads SET refused = NULL, refused_at = NULL, adopt = true, id = gen_random_uuid()
WHERE group_name = $1 AND ($2::int IS NULL OR partition = $2) AND refused IS NOT NULL
RETURNING partition`

// outboxAdopted ends the adoption of group $1's partition $2: its progress
// in Kafka is this outbox's own again.
const outboxAdopted = `
UPDATE {{schema}}.outbox_heads SET adopt = false WHERE group_name = $1 AND partition = $2 AND adopt`

// outboxHeadCheck is what every read also returns, for the relay to notice
// that the outbox changed under a live producer (its tables reset, the
// database failed over, a refusal recorded): the head's identity and
// refusal, and the smallest segment number left.
const outboxHeadCheck = `h AS (
    SELECT h.id::text AS id, h.refused,
           (SELECT min(seq) FROM {{schema}}.outbox_segments WHERE group_name = $1 AND partition = $2) AS lo
    FROM (SELECT 1) AS one
    LEFT JOIN {{schema}}.outbox_heads h ON h.group_name = $1 AND h.partition = $2)`

// outboxRead returns the records of group $1's partition $2 in the
// segments after sequence number $3, segment after segment, each in append
// order, at most $4 rows: the head check (id, refused, lo: outboxHeadCheck),
// then seq, scope, the segment's age in microseconds (on the database's
// clock), topic, key, value, headers. An empty segment is one row of NULLs
// after its age; no segment, one row of NULLs after the head check.
const outboxRead = `
WITH ` + outboxHeadCheck + `,
s AS (
    SELECT seq, scope, committed_at FROM {{schema}}.outbox_segments
    WHERE group_name = $1 AND partition = $2 AND seq > $3
    ORDER BY seq LIMIT $4),
rows AS (
    SELECT s.seq, s.scope, (extract(epoch FROM clock_timestamp() - s.committed_at) * 1e6)::bigint AS age,
           r.id, r.topic, r.key, r.value, r.headers
    FROM s LEFT JOIN LATERAL (
        -- ORDER BY keeps the planner from flattening the lateral join: each
        -- segment's records are one index range, whatever the statistics (a
        -- hash or merge join over never-analyzed tables read every record of
        -- the partition for each read)
        SELECT r.id, r.topic, r.key, r.value, r.headers FROM {{schema}}.outbox_records r
        WHERE r.group_name = $1 AND r.partition = $2 AND r.scope = s.scope
        ORDER BY r.id) r ON true
    ORDER BY s.seq, r.id
    LIMIT $4)
SELECT h.id, h.refused, h.lo, rows.seq, rows.scope, rows.age, rows.topic, rows.key, rows.value, rows.headers
FROM h LEFT JOIN rows ON true
ORDER BY rows.seq, rows.id`

// outboxReadSegment returns the records of one segment, $3, of group $1's
// partition $2, in append order (a segment larger than a read's limit is
// read on its own, whole); the columns of outboxRead.
const outboxReadSegment = `
WITH ` + outboxHeadCheck + `,
rows AS (
    SELECT s.seq, s.scope, (extract(epoch FROM clock_timestamp() - s.committed_at) * 1e6)::bigint AS age,
           r.id, r.topic, r.key, r.value, r.headers
    FROM {{schema}}.outbox_segments s LEFT JOIN {{schema}}.outbox_records r
      ON r.group_name = $1 AND r.partition = $2 AND r.scope = s.scope
    WHERE s.group_name = $1 AND s.partition = $2 AND s.seq = $3)
SELECT h.id, h.refused, h.lo, rows.seq, rows.scope, rows.age, rows.topic, rows.key, rows.value, rows.headers
FROM h LEFT JOIN rows ON true
ORDER BY rows.id`

// outboxAt returns, for group $1's partition $2, the scope of segment $3
// (NULL: none) and whether a segment numbered below $3 is left: what tells
// the segment the relay last published from one that reused its number
// (after a restore or a failover that lost commits).
const outboxAt = `
SELECT (SELECT scope FROM {{schema}}.outbox_segments WHERE group_name = $1 AND partition = $2 AND seq = $3),
       EXISTS (SELECT 1 FROM {{schema}}.outbox_segments WHERE group_name = $1 AND partition = $2 AND seq < $3)`

// outboxDelete deletes up to $4 of the published segments (sequence number
// at most $3) of group $1's partition $2, oldest first, with their
// records; it returns how many segments it deleted. Segments are numbered
// without gaps and deleted oldest first, so the oldest $4 are a range of
// numbers from the smallest left: one index range, whatever the backlog
// (an IN (... LIMIT) scanned every segment once the table was analyzed).
const outboxDelete = `
WITH s AS (
    DELETE FROM {{schema}}.outbox_segments
    WHERE group_name = $1 AND partition = $2
      AND seq <= least($3, (SELECT min(seq) FROM {{schema}}.outbox_segments WHERE group_name = $1 AND partition = $2) + $4 - 1)
    RETURNING scope),
r AS (
    DELETE FROM {{schema}}.outbox_records o
    WHERE o.group_name = $1 AND o.partition = $2 AND o.scope = ANY (ARRAY(SELECT scope FROM s)))
SELECT count(*) FROM s`

// OutboxSQL are the statements of the fenced outbox (package outbox and its
// relay, kafka.Relay).
type OutboxSQL struct {
	Append, Seal, Head, Refuse, Clear, Adopted, Read, ReadSegment, At, Delete string
}
