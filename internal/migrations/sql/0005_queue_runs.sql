-- The grant running each partition's queue (package queue). A Processor's
-- Run records its grant's token here when it starts and clears it when it
-- ends cleanly: every job it started has its outcome recorded, or was
-- interrupted by a handoff. A run that finds its predecessor's token still
-- here knows that run ended abruptly (a crash, a kill, a pause past the
-- lease, a lost database) while jobs at the head of the partition may have
-- been running: it runs them one at a time, spending an attempt before each,
-- so that a job that ends every run it is in (a crash loop) runs out of
-- attempts instead of blocking its partition and felling worker after
-- worker. The token only grows: a stale run's late start changes nothing.
CREATE TABLE {{schema}}.queue_runs (
    group_name text    NOT NULL,
    partition  integer NOT NULL CHECK (partition >= 0),
    token      bigint,
    PRIMARY KEY (group_name, partition)
);
