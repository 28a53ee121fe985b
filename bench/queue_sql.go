package main

import (
	"github.com/leasehold/leasehold/internal/store"
)

// The raw-sql baseline runs the queue's own fetch and complete statements:
// both take them from internal/store.

// The raw-sql baseline's inserts: the columns queue.Client fills, without
// its unique-key handling, id pre-allocation and per-input results. $1
// group, $2 partition(s), $3 key(s), $4 kind, $5 args, $6 max attempts.
const (
	rawInsertOne = `INSERT INTO {{schema}}.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())`
	rawInsertMany = `INSERT INTO {{schema}}.jobs (group_name, partition, key, kind, args, max_attempts, run_at)
SELECT $1, p, k, $4, a, $6, clock_timestamp()
FROM unnest($2::int[], $3::text[], $5::jsonb[]) WITH ORDINALITY AS t(p, k, a, n) ORDER BY n`
	// rawInsertNotify is rawInsertOne that also notifies rawChannel with
	// the job's partition, in the same statement.
	rawInsertNotify = `WITH ins AS (` + rawInsertOne + ` RETURNING partition)
SELECT pg_notify('` + rawChannel + `', partition::text) FROM ins`
)

// queueEffectsTable is where the tx-one-row case's handlers write their one
// row per job, in the bench database's public schema (River's in its own
// database).
const queueEffectsTable = "queue_bench_effects"

// queueCreateEffects creates queueEffectsTable. The primary key on job_id
// makes a second application of a job fail loudly.
const queueCreateEffects = `CREATE TABLE ` + queueEffectsTable + ` (
    job_id bigint PRIMARY KEY,
    key    text   NOT NULL,
    token  bigint NOT NULL)`

// queueInsertEffect is the one row the tx-one-row handlers insert: $1 job
// id, $2 key, $3 token (River: the job's attempt).
const queueInsertEffect = `INSERT INTO ` + queueEffectsTable + ` (job_id, key, token) VALUES ($1, $2, $3)`

// queueSQL holds the statements rendered for the schema the suite uses.
type queueSQL struct {
	fetch, complete, completeFenced string
	// fetchWalk is the fetch of one partition while kinds are paused or
	// keys are full (fair turns): its jobs are credited as the fetch's.
	fetchWalk                           string
	insertOne, insertMany, insertNotify string
	jobs                                string // the quoted jobs table
	groups                              string // the quoted groups table
}

// renderQueueSQL renders the statements for schema ("" for the default),
// the way package queue renders them.
func renderQueueSQL(schema string) (queueSQL, error) {
	q, err := store.Quote(schema)
	if err != nil {
		return queueSQL{}, err
	}
	st, err := store.For(schema)
	if err != nil {
		return queueSQL{}, err
	}
	return queueSQL{
		fetch:          st.Queue.Fetch,
		fetchWalk:      st.Queue.FetchWalk,
		complete:       st.Queue.Complete,
		completeFenced: st.Queue.CompleteFenced,
		insertOne:      store.Render(rawInsertOne, q),
		insertMany:     store.Render(rawInsertMany, q),
		insertNotify:   store.Render(rawInsertNotify, q),
		jobs:           q + ".jobs",
		groups:         q + ".groups",
	}, nil
}
