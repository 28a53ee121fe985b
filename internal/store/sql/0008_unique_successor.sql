-- A job's successor may take its unique key. A transactional handler that
-- enqueues, in its own transaction, a job with the unique key of the job it
-- runs releases that key first (queueReleaseUnique): the running job is
-- completed in the same transaction, so at its commit the key passes from
-- the finished job to its successor, and if the transaction rolls back
-- nothing changed. A released job leaves the unique index at once, for its
-- own transaction only; every other enqueue of the key still conflicts with
-- it (and waits for that transaction to end).
--
-- unique_released is true only on jobs completed by such a transaction.
-- Rebuilding jobs_unique reads the table once, holding off enqueues
-- meanwhile.
ALTER TABLE {{schema}}.jobs ADD COLUMN unique_released boolean NOT NULL DEFAULT false;

DROP INDEX {{schema}}.jobs_unique;
CREATE UNIQUE INDEX jobs_unique ON {{schema}}.jobs (group_name, unique_key)
    WHERE unique_key IS NOT NULL AND state = 'pending' AND NOT unique_released;
