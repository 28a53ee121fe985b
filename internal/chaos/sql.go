package chaos

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
)

// The workloads' statements. {{schema}} is the run's schema.
const (
	// The queue workload's ledger: one row per application of a job.
	sqlLedger = `
CREATE TABLE {{schema}}.chaos_ledger (
    n         bigserial   PRIMARY KEY,
    job_id    bigint      NOT NULL,
    key       text        NOT NULL,
    partition integer     NOT NULL,
    token     bigint      NOT NULL,
    worker    text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
)`
	sqlGroup       = `INSERT INTO {{schema}}.groups (name, partitions) VALUES ($1, $2)`
	sqlApply       = `INSERT INTO {{schema}}.chaos_ledger (job_id, key, partition, token, worker) VALUES ($1, $2, $3, $4, $5)`
	sqlItems       = `SELECT count(*) FROM {{schema}}.jobs WHERE group_name = $1`
	sqlOutstanding = `SELECT count(*) FROM {{schema}}.jobs WHERE group_name = $1 AND state = 'pending'`
	sqlApplied     = `SELECT coalesce(max(n), 0) FROM {{schema}}.chaos_ledger`
	sqlJobs        = `SELECT id, key, partition, state FROM {{schema}}.jobs WHERE group_name = $1`
	sqlEntries     = `SELECT n, job_id, key, partition, token, worker FROM {{schema}}.chaos_ledger`

	// The queue workload's plain jobs: one row per run of the plain
	// handler's effect, on its own autocommit statement (not fenced: at
	// least once per job).
	sqlPlainLedger = `
CREATE TABLE {{schema}}.chaos_plain_runs (
    n         bigserial   PRIMARY KEY,
    job_id    bigint      NOT NULL,
    key       text        NOT NULL,
    partition integer     NOT NULL,
    token     bigint      NOT NULL,
    worker    text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
)`
	sqlPlainApply = `INSERT INTO {{schema}}.chaos_plain_runs (job_id, key, partition, token, worker) VALUES ($1, $2, $3, $4, $5)`
	sqlPlainJobs  = `
SELECT id, coalesce(finished_token, 0), finished_at FROM {{schema}}.jobs WHERE group_name = $1 AND kind = '` + plainKind + `'`
	sqlPlainRuns = `SELECT n, job_id, partition, token, worker FROM {{schema}}.chaos_plain_runs`

	// The Kafka workload's ledger: one row per application of a record.
	// n is drawn inside the applying statement, in offset order.
	sqlKafkaLedger = `
CREATE TABLE {{schema}}.chaos_kafka_ledger (
    n         bigserial   PRIMARY KEY,
    topic     text        NOT NULL,
    partition integer     NOT NULL,
    "offset"  bigint      NOT NULL,
    token     bigint      NOT NULL,
    worker    text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
)`
	// sqlKafkaApply appends a batch's rows ($5: its offsets, ascending),
	// numbered in offset order.
	sqlKafkaApply = `
INSERT INTO {{schema}}.chaos_kafka_ledger (topic, partition, "offset", token, worker)
SELECT $1, $2, o, $3, $4 FROM unnest($5::bigint[]) WITH ORDINALITY AS u(o, i) ORDER BY i`
	sqlKafkaApplied = `SELECT coalesce(max(n), 0) FROM {{schema}}.chaos_kafka_ledger`
	sqlKafkaEntries = `SELECT n, topic, partition, "offset", token, worker FROM {{schema}}.chaos_kafka_ledger`

	// The kafka-out workload's outbox (package outbox's tables, migration
	// 17): segments not yet published (and deleted) by a relay.
	sqlOutboxPending = `SELECT count(*) FROM {{schema}}.outbox_segments WHERE group_name = $1`

	// The batch workload's items write to chaos_ledger (as the queue
	// workload's jobs); its follow-ups, one row per run, here. items_seen
	// is how many items had their effect committed when the run's
	// statement began (its snapshot): every one, if the follow-up ran
	// after the batch's last item.
	sqlFollowups = `
CREATE TABLE {{schema}}.chaos_followups (
    n          bigserial   PRIMARY KEY,
    job_id     bigint      NOT NULL,
    which      text        NOT NULL,
    batch_id   bigint      NOT NULL,
    partition  integer     NOT NULL,
    token      bigint      NOT NULL,
    worker     text        NOT NULL,
    items_seen bigint      NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
)`
	sqlFollowupApply = `
INSERT INTO {{schema}}.chaos_followups (job_id, which, batch_id, partition, token, worker, items_seen)
SELECT $1, $2, $3, $4, $5, $6, (SELECT count(DISTINCT l.job_id) FROM {{schema}}.chaos_ledger AS l)`
	sqlFollowupRuns = `SELECT n, job_id, which, token, worker, items_seen FROM {{schema}}.chaos_followups`
	// Items and follow-ups of the group's batches, pending jobs and
	// batches not finished.
	sqlBatchItems = `
SELECT id, key, partition, state, batch_item FROM {{schema}}.jobs WHERE group_name = $1 AND batch_item IS NOT NULL`
	sqlBatchFollowups = `
SELECT id, followup, state FROM {{schema}}.jobs WHERE group_name = $1 AND followup IS NOT NULL`
	sqlBatchCount       = `SELECT count(*) FROM {{schema}}.jobs WHERE group_name = $1 AND batch_item IS NOT NULL`
	sqlBatchOutstanding = `
SELECT (SELECT count(*) FROM {{schema}}.jobs WHERE group_name = $1 AND state = 'pending')
     + (SELECT count(*) FROM {{schema}}.batches WHERE group_name = $1 AND finished_at IS NULL)`
)

// maxAttempts keeps jobs from being discarded by failures the faults cause
// (a restarted database, a cut connection): a discarded job would be lost.
const maxAttempts = 10000

// queries are the workloads' statements rendered for one schema.
type queries struct {
	ledger, group, apply, items, outstanding, applied, jobs, entries string
	kafkaLedger, kafkaApply, kafkaApplied, kafkaEntries              string
	followups, followupApply, followupRuns, batchItems               string
	batchFollowups, batchCount, batchOutstanding                     string
	plainLedger, plainApply, plainJobs, plainRuns                    string
	outboxPending                                                    string
}

func render(schema string) (queries, error) {
	q, err := store.Quote(schema)
	if err != nil {
		return queries{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	r := func(sql string) string { return store.Render(sql, q) }
	return queries{ledger: r(sqlLedger), group: r(sqlGroup), apply: r(sqlApply), items: r(sqlItems), outstanding: r(sqlOutstanding),
		applied: r(sqlApplied), jobs: r(sqlJobs), entries: r(sqlEntries),
		kafkaLedger: r(sqlKafkaLedger), kafkaApply: r(sqlKafkaApply), kafkaApplied: r(sqlKafkaApplied), kafkaEntries: r(sqlKafkaEntries),
		followups: r(sqlFollowups), followupApply: r(sqlFollowupApply), followupRuns: r(sqlFollowupRuns),
		batchItems: r(sqlBatchItems), batchFollowups: r(sqlBatchFollowups), batchCount: r(sqlBatchCount),
		batchOutstanding: r(sqlBatchOutstanding),
		plainLedger:      r(sqlPlainLedger), plainApply: r(sqlPlainApply), plainJobs: r(sqlPlainJobs), plainRuns: r(sqlPlainRuns),
		outboxPending: r(sqlOutboxPending)}, nil
}

// handle returns leasehold's handle on pool, in schema; a nil log means
// slog.Default().
func handle(pool *pgxpool.Pool, schema string, log *slog.Logger) (*leasehold.DB, error) {
	return leasehold.Open(pool, leasehold.Config{Schema: schema, Logger: log})
}

// workerHandle is handle for a worker's pool: through a transaction pooler
// when w says so.
func workerHandle(pool *pgxpool.Pool, w WorkerEnv) (*leasehold.DB, error) {
	return leasehold.Open(pool, leasehold.Config{Schema: w.Schema, Logger: w.Logger, TransactionPooling: w.TransactionPooling})
}
