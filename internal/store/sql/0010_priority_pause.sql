-- Pauses (package queue, docs/control.md): a row pauses a whole group
-- (kind '') or one kind of it. Owners stop fetching the paused jobs; the
-- row outlives every worker, so a paused group stays paused across
-- restarts until it is resumed (the row deleted).
CREATE TABLE {{schema}}.pauses (
    group_name text        NOT NULL REFERENCES {{schema}}.groups (name),
    kind       text        NOT NULL DEFAULT '' CHECK (octet_length(kind) <= 100),
    paused_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    paused_by  text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT '',
    PRIMARY KEY (group_name, kind)
);

-- Priorities: 1 (the default, first) to 4 (last), as in River. An owner's
-- fetch takes a partition's due jobs in (priority, run_at, id) order,
-- probing each level through jobs_due, so that neither a low-priority nor
-- a future backlog is walked. jobs_due replaces the old one instead of
-- joining it: one index more would cost every enqueue and retry.
--
-- Locking (upgrade note, also in docs/control.md): the ALTER TABLE takes
-- ACCESS EXCLUSIVE on jobs, held to the end of the migration's one
-- transaction (see internal/store/migrate.go): every read and write of
-- jobs (enqueues, fetches, completions, admin reads) waits meanwhile. The
-- constant default makes the column a catalog change, not a rewrite; the
-- CHECK is added NOT VALID so that it does not scan the table: every
-- existing row has the default 1, which it admits, and new and updated
-- rows are checked. (VALIDATE in the same transaction would scan under the
-- same lock, gaining nothing.) Rebuilding jobs_due reads every row of the
-- table once, under that lock: its time grows with the table (finished
-- jobs included). CREATE INDEX CONCURRENTLY cannot run inside a
-- transaction, so it is not available to migrations.
ALTER TABLE {{schema}}.jobs ADD COLUMN priority smallint NOT NULL DEFAULT 1;
ALTER TABLE {{schema}}.jobs ADD CONSTRAINT jobs_priority_check CHECK (priority BETWEEN 1 AND 4) NOT VALID;
DROP INDEX {{schema}}.jobs_due;
CREATE INDEX jobs_due ON {{schema}}.jobs (group_name, partition, priority, run_at, id) WHERE state = 'pending';

-- Per-kind policy: whether max_attempts was chosen by the enqueuer (true)
-- or is the client's default (false), which the kind's policy may
-- replace. Jobs enqueued before this migration count as chosen.
ALTER TABLE {{schema}}.jobs ADD COLUMN max_attempts_set boolean NOT NULL DEFAULT true;
