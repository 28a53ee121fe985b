package store

// kafkaRead returns a partition's stored offset and the token that wrote it.
// $1 group, $2 topic, $3 partition.
const kafkaRead = `
SELECT next_offset, token FROM {{schema}}.kafka_offsets
WHERE group_name = $1 AND topic = $2 AND partition = $3`

// kafkaAdvance moves a partition's offset from $6 (NULL: no row yet) to $4 for
// token $5, in the transaction that holds the handler's effects, after the
// fence check. The conditional write is the second line of defence behind
// the lease check: it refuses an owner whose view of the offset is stale
// (next_offset moved under it, or a row appeared) or whose token is lower
// than the last writer's. It returns 1 when it applied, 0 otherwise.
// $1 group, $2 topic, $3 partition, $4 new next_offset, $5 token,
// $6 previous next_offset or NULL.
const kafkaAdvance = `
WITH upd AS (
    UPDATE {{schema}}.kafka_offsets
    SET next_offset = $4, token = $5, updated_at = clock_timestamp()
    WHERE group_name = $1 AND topic = $2 AND partition = $3
      AND $6::bigint IS NOT NULL AND next_offset = $6::bigint AND token <= $5
    RETURNING 1),
ins AS (
    INSERT INTO {{schema}}.kafka_offsets (group_name, topic, partition, next_offset, token)
    SELECT $1, $2, $3, $4, $5 WHERE $6::bigint IS NULL
    ON CONFLICT (group_name, topic, partition) DO NOTHING
    RETURNING 1)
SELECT (SELECT count(*) FROM upd) + (SELECT count(*) FROM ins)`

// kafkaList returns the stored offsets of a group: topic, partition,
// next_offset, token, updated_at. $1 group.
const kafkaList = `
SELECT topic, partition, next_offset, token, updated_at FROM {{schema}}.kafka_offsets
WHERE group_name = $1 ORDER BY topic, partition`

// kafkaTopics records the topic list $2 of group $1 if the group has none
// yet, and returns the group's list: the one just recorded or the one
// recorded before. A concurrent first record of the same group makes the
// statement wait for it, then return no row (its snapshot predates that
// row): run it again.
const kafkaTopics = `
WITH ins AS (
    INSERT INTO {{schema}}.kafka_topics (group_name, topics) VALUES ($1, $2)
    ON CONFLICT (group_name) DO NOTHING
    RETURNING topics)
SELECT topics FROM ins
UNION ALL
SELECT topics FROM {{schema}}.kafka_topics WHERE group_name = $1
LIMIT 1`
