-- What is running now (package queue, docs/running.md). Each partition's
-- owner publishes the jobs it runs, at most once per publish interval and
-- only when the set changed: one row per partition, written by the
-- Processor's publisher in one statement for all its partitions, never a
-- write per job. A row is written only by a grant whose token is at least
-- the stored one, so a stale owner cannot overwrite a newer owner's row.
-- Readers trust a row only while its token is the partition lease's token
-- and that lease is unexpired (the publisher does not rewrite an unchanged
-- set, so updated_at says when the set last changed, not whether the owner
-- is alive).
CREATE TABLE {{schema}}.running (
    group_name text        NOT NULL,
    partition  int         NOT NULL,
    token      bigint      NOT NULL,
    worker     text        NOT NULL,
    -- [{"id": 1, "kind": "email", "started_at": "..."}], in id order
    jobs       jsonb       NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (group_name, partition)
);
