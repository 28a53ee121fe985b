-- Jobs. A job belongs to one partition of its group (partition.Of(key)),
-- and only that partition's owner processes it: no per-job claim column.
-- state: pending (waiting or due), completed, discarded (out of attempts),
-- cancelled. finished_token is the fencing token of the grant that finished
-- the job.
CREATE TABLE {{schema}}.jobs (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name     text        NOT NULL REFERENCES {{schema}}.groups (name),
    partition      integer     NOT NULL CHECK (partition >= 0),
    key            text        NOT NULL CHECK (octet_length(key) <= 255),
    kind           text        NOT NULL CHECK (octet_length(kind) BETWEEN 1 AND 100),
    args           jsonb       NOT NULL,
    state          text        NOT NULL DEFAULT 'pending'
                               CHECK (state IN ('pending', 'completed', 'discarded', 'cancelled')),
    attempt        integer     NOT NULL DEFAULT 0,
    max_attempts   integer     NOT NULL CHECK (max_attempts >= 1),
    run_at         timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at    timestamptz,
    finished_token bigint,
    errors         jsonb       NOT NULL DEFAULT '[]',
    unique_key     text        CHECK (octet_length(unique_key) <= 255)
);

-- The owner's fetch: due pending jobs of one partition in (run_at, id) order.
CREATE INDEX jobs_due ON {{schema}}.jobs (group_name, partition, run_at, id) WHERE state = 'pending';
-- Per-key order: a job waits while an earlier pending job of its key exists.
CREATE INDEX jobs_key ON {{schema}}.jobs (group_name, partition, key, id) WHERE state = 'pending';
-- A unique key makes a second enqueue a no-op while the first is pending.
CREATE UNIQUE INDEX jobs_unique ON {{schema}}.jobs (group_name, unique_key)
    WHERE unique_key IS NOT NULL AND state = 'pending';
-- Retention: finished jobs by age.
CREATE INDEX jobs_finished ON {{schema}}.jobs (group_name, partition, finished_at) WHERE state <> 'pending';
