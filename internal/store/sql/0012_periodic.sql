-- Periodic jobs (package periodic, docs/periodic.md). One leader per group
-- (the lease "periodic/<group>") enqueues each slot of each schedule in a
-- transaction fenced by its token; periodic_slots makes a second enqueue
-- of one slot impossible even without the fence (its primary key).
--
-- periodic_schedules records the declared schedules (the leader upserts
-- them when it takes the lease) for the CLI, and since: when the schedule
-- was first declared, the anchor of its first slot (no backfill before it);
-- missed_total counts the slots no leader enqueued since then (the sum of
-- the missed counts of its slot rows, kept so that reading it costs no
-- walk over the retained rows).
-- No foreign key to groups: a scheduler may declare before a worker has
-- created the group's row.
CREATE TABLE {{schema}}.periodic_schedules (
    group_name  text        NOT NULL CHECK (octet_length(group_name) BETWEEN 1 AND 100),
    name        text        NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 100),
    spec        text        NOT NULL,
    policy      text        NOT NULL CHECK (policy IN ('run-once', 'skip')),
    since       timestamptz NOT NULL,
    next_slot   timestamptz,
    missed_total bigint     NOT NULL DEFAULT 0 CHECK (missed_total >= 0),
    declared_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_name, name)
);

-- One row per slot a leader accounted for: job_id is the enqueued job (NULL
-- when the slot was skipped under the skip policy, skipped then true, or
-- when its job was a duplicate of a pending job with the same UniqueKey,
-- skipped then false); missed counts the
-- slots between the schedule's previous row and this one that no leader
-- enqueued (collapsed into this row, or skipped); token is the leader's
-- lease token. Rows older than the leader's retention are pruned, except
-- each schedule's latest (where the next leader resumes).
CREATE TABLE {{schema}}.periodic_slots (
    group_name  text        NOT NULL,
    schedule    text        NOT NULL,
    slot        timestamptz NOT NULL,
    job_id      bigint,
    skipped     boolean     NOT NULL DEFAULT false,
    token       bigint      NOT NULL CHECK (token > 0),
    missed      integer     NOT NULL DEFAULT 0 CHECK (missed >= 0),
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (group_name, schedule, slot)
);
