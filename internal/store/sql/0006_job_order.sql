-- Ordering is opt-in. A job without a key ('') has no ordering constraint:
-- the client spreads keyless jobs over the partitions, and the owner runs
-- them without looking at any other job. Jobs sharing a non-empty key run
-- one at a time, in id order.
--
-- holds says what a keyed job does to the later jobs of its key while it
-- waits (for a retry, a snooze, or its RunAt): true (the default, strict
-- order) keeps them waiting behind it; false steps it out of line until it
-- is due again, and the later jobs run meanwhile.
ALTER TABLE {{schema}}.jobs ADD COLUMN holds boolean NOT NULL DEFAULT true;

-- The owner's per-key probe: a key's pending jobs in id order. Keyless jobs
-- are never probed, so they are left out of the index.
DROP INDEX {{schema}}.jobs_key;
CREATE INDEX jobs_key ON {{schema}}.jobs (group_name, partition, key, id) WHERE state = 'pending' AND key <> '';
