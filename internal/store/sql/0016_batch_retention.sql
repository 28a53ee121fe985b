-- Retention of finished batches (see queueRetainItems, batchMarkGone,
-- batchRetain). items_gone_at: when a retention round found none of the
-- finished batch's items left (they can never come back: the batch is
-- sealed). Item retention probes only the batches not marked so, oldest
-- finished first and a bounded number per round; batch rows marked so are
-- deleted once finished longer ago than the processors' BatchRetention.
-- So a round's cost is bounded, whatever the number of batches ever run.
ALTER TABLE {{schema}}.batches ADD COLUMN items_gone_at timestamptz;
CREATE INDEX batches_retain_items ON {{schema}}.batches (group_name, finished_at)
    WHERE finished_at IS NOT NULL AND items_gone_at IS NULL;
CREATE INDEX batches_retain ON {{schema}}.batches (group_name, finished_at)
    WHERE items_gone_at IS NOT NULL;
