-- What the web UI and the CLI show operators (package queue, docs/ui.md).
--
-- Failed jobs by id: the jobs page's filter on state discarded or
-- cancelled reads only those, newest first. Partial: a job enters it only
-- when it fails (its completion already writes the row), so the queue's
-- common path (enqueue, fetch, complete as completed) never maintains it.
-- No index on kind, or on key for every state: each would be written by
-- every enqueue and every completion; the jobs page bounds its walk
-- instead (see queue.Client.Page). Building it reads the table once, under
-- the migration's lock (see 0010's note).
CREATE INDEX jobs_failed ON {{schema}}.jobs (group_name, id) WHERE state IN ('discarded', 'cancelled');

-- Outcomes per minute: each Processor counts the outcomes of its runs in
-- memory and adds them here every publish interval (one upsert for all
-- its groups, nothing when idle). One row per group, minute (database
-- clock) and worker (the member id), so that Processors never contend on
-- a row. Kept an hour.
CREATE TABLE {{schema}}.job_stats (
    group_name text        NOT NULL,
    minute     timestamptz NOT NULL,
    worker     text        NOT NULL,
    completed  bigint      NOT NULL DEFAULT 0,
    retried    bigint      NOT NULL DEFAULT 0,
    discarded  bigint      NOT NULL DEFAULT 0,
    cancelled  bigint      NOT NULL DEFAULT 0,
    snoozed    bigint      NOT NULL DEFAULT 0,
    fenced     bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (group_name, minute, worker)
);

-- Events of partitions, for operators: a grant starting to run a
-- partition's queue (handoff; written by the statement that records the
-- run in queue_runs, so it costs no round trip) and an outcome refused by
-- the fence (fenced; written in batches by the Processor's flusher, off
-- the jobs' path). Kept a day.
CREATE TABLE {{schema}}.events (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    group_name text        NOT NULL,
    partition  integer     NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('handoff', 'fenced')),
    owner      text        NOT NULL,
    token      bigint      NOT NULL,
    previous   bigint,
    abrupt     boolean     NOT NULL DEFAULT false,
    job        bigint
);
CREATE INDEX events_group ON {{schema}}.events (group_name, id);
