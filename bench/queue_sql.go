package main

import (
	"github.com/leasehold/leasehold/internal/migrations"
	"github.com/leasehold/leasehold/internal/queuesql"
)

// The raw-sql baseline runs the queue's own fetch and complete statements:
// both take them from internal/queuesql.
const (
	queueFetch    = queuesql.Fetch
	queueComplete = queuesql.Complete
)

// queueEffectsTable is where the tx-one-row case's handlers write their one
// row per job, in the bench database's public schema.
const queueEffectsTable = "queue_bench_effects"

// queueCreateEffects creates queueEffectsTable. The primary key on job_id
// makes a second application of a job fail loudly.
const queueCreateEffects = `CREATE TABLE ` + queueEffectsTable + ` (
    job_id bigint PRIMARY KEY,
    key    text   NOT NULL,
    token  bigint NOT NULL)`

// queueInsertEffect is the one row both systems' tx-one-row handlers
// insert: $1 job id, $2 key, $3 token.
const queueInsertEffect = `INSERT INTO ` + queueEffectsTable + ` (job_id, key, token) VALUES ($1, $2, $3)`

// queueSQL holds the statements rendered for the schema the suite uses.
type queueSQL struct {
	fetch, complete string
	jobs            string // the quoted jobs table
	groups          string // the quoted groups table
}

// renderQueueSQL renders the statements for schema ("" for the default),
// the way package queue renders them.
func renderQueueSQL(schema string) (queueSQL, error) {
	q, err := migrations.Schema(schema)
	if err != nil {
		return queueSQL{}, err
	}
	return queueSQL{
		fetch:    migrations.Render(queueFetch, q),
		complete: migrations.Render(queueComplete, q),
		jobs:     q + ".jobs",
		groups:   q + ".groups",
	}, nil
}
