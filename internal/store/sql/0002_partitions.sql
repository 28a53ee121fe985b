-- Partition groups: a group's partition count is fixed when the group is
-- created; members configured with another count are refused.
CREATE TABLE {{schema}}.groups (
    name       text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 100),
    partitions integer     NOT NULL CHECK (partitions BETWEEN 1 AND 65536),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Members of a group. A member is live while expires_at (database clock) is
-- in the future. incarnation tells two processes using the same id apart.
CREATE TABLE {{schema}}.members (
    group_name   text        NOT NULL REFERENCES {{schema}}.groups (name) ON DELETE CASCADE,
    id           text        NOT NULL CHECK (octet_length(id) BETWEEN 1 AND 255),
    incarnation  text        NOT NULL,
    joined_at    timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (group_name, id)
) WITH (fillfactor = 50);
