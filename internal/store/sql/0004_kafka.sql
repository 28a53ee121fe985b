-- Kafka offsets (package queue/kafka). One row per (group, topic,
-- partition): next_offset is the offset of the next record to process
-- ("last processed offset + 1"). It advances in the same transaction as the
-- handler's effects, after the partition's lease was checked (fenced), and
-- only from the value the owner read (next_offset = previous) with a token
-- no lower than the one that wrote it last.
CREATE TABLE {{schema}}.kafka_offsets (
    group_name  text        NOT NULL REFERENCES {{schema}}.groups (name),
    topic       text        NOT NULL CHECK (octet_length(topic) BETWEEN 1 AND 249),
    partition   integer     NOT NULL CHECK (partition >= 0),
    next_offset bigint      NOT NULL CHECK (next_offset >= 0),
    token       bigint      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_name, topic, partition)
);
