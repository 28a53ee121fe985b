-- Limits per key (see docs/control.md). key_limit: the job's own
-- KeyConcurrency, how many jobs of its key may run at once when it is the
-- next to start (NULL: its kind's policy). Nullable without a default: no
-- table rewrite.
ALTER TABLE {{schema}}.jobs ADD COLUMN key_limit smallint;
-- rate: the recent starts of the rate-limited keys of the run that ended
-- cleanly (written by the statement that closes it, queueCloseRun), read
-- by the next owner so that it does not grant a burst the previous owner
-- already spent; closed_at: when it was written (the starts' ages count
-- from then).
ALTER TABLE {{schema}}.queue_runs ADD COLUMN rate jsonb, ADD COLUMN closed_at timestamptz;
-- running.limited: the keys whose jobs the partition's owner holds back by
-- a limit at its last snapshot (at most 20, the busiest first), written by
-- the publisher with the jobs (runningPublish): a JSON array of {"key",
-- "kind", "limit", "waiting"}; NULL or [] when none is held back.
ALTER TABLE {{schema}}.running ADD COLUMN limited jsonb;
-- group_kinds.limits: the limits the kind's handler declares
-- (queue.Policy: {"key_concurrency", "key_rate_starts", "key_rate_per_ms",
-- "group_concurrency"}), as the worker that recorded the kind last
-- declared them (RecordKinds); NULL: recorded before this migration.
ALTER TABLE {{schema}}.group_kinds ADD COLUMN limits jsonb;
