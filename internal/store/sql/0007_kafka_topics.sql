-- The topic list of each Kafka consumer group (package kafka). A group's
-- partition p consumes Kafka partition p mod PartitionsPerTopic of topic
-- topics[p / PartitionsPerTopic]: the list, in order, is part of the
-- group's layout. The first consumer to open the group records it; a
-- consumer with another list (other topics, or the same ones reordered)
-- would put one Kafka partition under two leases, and is refused. No
-- foreign key to groups: a consumer opens before its worker creates the
-- group's row.
CREATE TABLE {{schema}}.kafka_topics (
    group_name text        PRIMARY KEY CHECK (octet_length(group_name) BETWEEN 1 AND 100),
    topics     text[]      NOT NULL CHECK (cardinality(topics) >= 1),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
