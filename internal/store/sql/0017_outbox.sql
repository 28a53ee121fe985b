-- The fenced outbox (package outbox, docs/kafka.md "Exactly once into
-- Kafka"). A handler's fenced transaction appends records (outbox_records,
-- stamped with its scope: a random id per handler run); just before its
-- fence check the runner seals them into one segment: the partition's next sequence number, taken
-- from outbox_heads under that row's lock, which is held until COMMIT. So
-- segments of a partition are numbered in commit order, without gaps, and a
-- segment numbered below one that is visible is visible too: the relay's
-- progress is one number per partition (the last segment published), stored
-- in Kafka with the records it published, in one Kafka transaction.
CREATE TABLE {{schema}}.outbox_heads (
    group_name text   NOT NULL,
    partition  int    NOT NULL,
    -- the sequence number the next segment gets (segments start at 1)
    next_seq   bigint NOT NULL,
    -- this outbox's identity, written with the relay's progress in Kafka:
    -- progress written for another outbox (the tables were reset, another
    -- deployment shares the transactional ids) is refused
    id         uuid   NOT NULL DEFAULT gen_random_uuid(),
    -- why the relay refused to publish the partition (its progress in
    -- Kafka does not belong to this outbox); set, the relay stays stopped
    -- until an operator clears it (docs/kafka.md)
    refused    text,
    refused_at timestamptz,
    -- set when an operator cleared a refusal: the relay publishes every
    -- segment left, ignoring progress that is not this outbox's, until it
    -- has committed progress of its own
    adopt      boolean NOT NULL DEFAULT false,
    PRIMARY KEY (group_name, partition)
);

CREATE TABLE {{schema}}.outbox_segments (
    group_name   text        NOT NULL,
    partition    int         NOT NULL,
    seq          bigint      NOT NULL,
    -- the scope (one handler run) whose records the segment holds
    scope        bigint      NOT NULL UNIQUE,
    -- how many records the transaction appended (savepoints rolled back
    -- after appending make this an upper bound)
    records      int         NOT NULL,
    -- the fencing token of the grant that committed it
    token        bigint      NOT NULL,
    committed_at timestamptz NOT NULL,
    PRIMARY KEY (group_name, partition, seq)
);

CREATE TABLE {{schema}}.outbox_records (
    group_name text   NOT NULL,
    partition  int    NOT NULL,
    scope      bigint NOT NULL,
    -- the order of the records within their scope
    id         bigint GENERATED ALWAYS AS IDENTITY,
    topic      text   NOT NULL,
    key        bytea,
    value      bytea,
    -- the record's headers, encoded by package outbox (count, then
    -- length-prefixed keys and values)
    headers    bytea,
    PRIMARY KEY (group_name, partition, scope, id)
);
