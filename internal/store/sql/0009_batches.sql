-- Batches (package queue, docs/batches.md). A batch is a named set of
-- jobs, its items, in one group: added in chunks by a producer that may
-- crash and submit again (an item key is unique in its batch, so a second
-- add is a no-op), sealed when every item is added, and finished when,
-- sealed, every item is finished. Its follow-up jobs (on complete: every
-- item finished; on success: every item completed) are enqueued once, by
-- the transaction that finishes it.
--
-- Locks, always taken in this order so that no two transactions wait for
-- each other in a cycle: item rows (jobs), then batch_counts rows in
-- (batch_id, partition) order, then the batch row. A producer's chunk
-- holds its batch row FOR KEY SHARE (the batch must stay unsealed while it
-- adds); seal and cancel take it FOR UPDATE (they wait for the chunks in
-- flight); a transaction that may have finished a batch takes it FOR NO
-- KEY UPDATE (one at a time, never waiting for a producer) and reads the
-- counters in a new statement, so that of two transactions finishing the
-- batch's last items on two partitions, the second sees the first's.
CREATE TABLE {{schema}}.batches (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name   text        NOT NULL REFERENCES {{schema}}.groups (name),
    name         text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 255),
    description  text        NOT NULL DEFAULT '',
    -- The follow-up jobs, resolved when the batch is created: kind, args,
    -- key, partition, max_attempts. NULL: none.
    on_complete  jsonb,
    on_success   jsonb,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    sealed_at    timestamptz,
    cancelled_at timestamptz,
    -- finished_at: when the batch first finished (its on-complete
    -- follow-up was enqueued then); succeeded_at: when every item first
    -- was completed (its on-success follow-up was enqueued then). Each is
    -- set once, by the transaction that enqueues the follow-up.
    finished_at  timestamptz,
    succeeded_at timestamptz,
    complete_job bigint,
    success_job  bigint,
    UNIQUE (group_name, name)
);

-- Items added, per partition: written by producers only (one row per
-- partition a chunk touched), so that they never wait for the owners.
CREATE TABLE {{schema}}.batch_totals (
    batch_id  bigint  NOT NULL REFERENCES {{schema}}.batches (id) ON DELETE CASCADE,
    partition integer NOT NULL CHECK (partition >= 0),
    total     bigint  NOT NULL CHECK (total >= 0),
    PRIMARY KEY (batch_id, partition)
);

-- Items finished, per partition and outcome: written by the statement that
-- finishes an item (the owner's fenced completion, an operator's cancel or
-- retry), counting the state changes it made. Each row is written by one
-- partition's owner (and rarely an operator): no row is written by every
-- completion, and reading a batch's progress reads 2 rows per partition.
CREATE TABLE {{schema}}.batch_counts (
    batch_id  bigint  NOT NULL REFERENCES {{schema}}.batches (id) ON DELETE CASCADE,
    partition integer NOT NULL CHECK (partition >= 0),
    -- No CHECK (>= 0): an upsert's proposed row, checked before its
    -- conflict is found, carries a retry's negative change.
    completed bigint  NOT NULL DEFAULT 0,
    failed    bigint  NOT NULL DEFAULT 0,
    cancelled bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (batch_id, partition)
);

-- A batch item is a job with batch_id and batch_item (its item key); a
-- follow-up is a job with batch_id and followup ('complete' or 'success').
-- No foreign key: retention deletes items and follow-ups on its own.
ALTER TABLE {{schema}}.jobs
    ADD COLUMN batch_id   bigint,
    ADD COLUMN batch_item text CHECK (octet_length(batch_item) BETWEEN 1 AND 255),
    ADD COLUMN followup   text CHECK (followup IN ('complete', 'success'));

-- Retention: plain jobs through jobs_finished, which leaves batch items
-- out (an unfinished batch's items are kept however old, and must not be
-- walked past by every retention statement); a finished batch's items
-- through jobs_batch_finished, per batch and partition. Rebuilding
-- jobs_finished reads the table once, holding off writes meanwhile.
DROP INDEX {{schema}}.jobs_finished;
CREATE INDEX jobs_finished ON {{schema}}.jobs (group_name, partition, finished_at)
    WHERE state <> 'pending' AND batch_item IS NULL;
CREATE INDEX jobs_batch_finished ON {{schema}}.jobs (batch_id, partition)
    WHERE state <> 'pending' AND batch_item IS NOT NULL;

-- An item key is unique in its batch (and finds a batch's items).
CREATE UNIQUE INDEX jobs_batch_item ON {{schema}}.jobs (batch_id, batch_item) WHERE batch_item IS NOT NULL;
-- Each follow-up is enqueued at most once: a second enqueue is an error.
CREATE UNIQUE INDEX jobs_batch_followup ON {{schema}}.jobs (batch_id, followup) WHERE followup IS NOT NULL;

-- The kinds each group's workers have handlers for, recorded by every
-- processor when it starts: a batch is refused items and follow-ups of a
-- kind no worker of the group handles.
CREATE TABLE {{schema}}.group_kinds (
    group_name text        NOT NULL REFERENCES {{schema}}.groups (name),
    kind       text        NOT NULL,
    seen_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_name, kind)
);
