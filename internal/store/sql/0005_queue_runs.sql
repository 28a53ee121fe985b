-- The grants running each partition's queue (package queue). A Processor's
-- Run records its grant's token here, open, when it starts, and closes it
-- when it ends cleanly: every job it started has its outcome recorded, or
-- was interrupted by a handoff. A run that finds its predecessor's record
-- still open knows that run ended abruptly (a crash, a kill, a pause past
-- the lease, a lost database) while jobs at the head of the partition may
-- have been running: it runs them one at a time, spending an attempt before
-- each, so that a job that ends every run it is in (a crash loop) runs out
-- of attempts instead of blocking its partition and felling worker after
-- worker. token is the newest grant that started a run, and only grows: a
-- stale run's late start changes nothing and is refused.
CREATE TABLE {{schema}}.queue_runs (
    group_name text    NOT NULL,
    partition  integer NOT NULL CHECK (partition >= 0),
    token      bigint  NOT NULL,
    open       boolean NOT NULL,
    PRIMARY KEY (group_name, partition)
);
