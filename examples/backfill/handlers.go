package main

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/queue"
)

// Reprice is a batch item: re-price one user from the plans table.
type Reprice struct {
	User int64 `json:"user"`
}

// Kind implements queue.Args.
func (Reprice) Kind() string { return "reprice_user" }

// Summarize is the batch's on-complete follow-up: write the run's summary.
type Summarize struct {
	Run string `json:"run"`
}

// Kind implements queue.Args.
func (Summarize) Kind() string { return "reprice_summary" }

// schema is the application's tables: the users to re-price, the price
// list (this year's prices), an audit row per price change (what makes a duplicate visible),
// and a summary row per run. users.fence_token holds the highest token that
// wrote each row. IF NOT EXISTS: a second run on the same database keeps
// what the first did.
const schema = `
CREATE TABLE IF NOT EXISTS plans (name text PRIMARY KEY, price_cents bigint NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id bigint PRIMARY KEY, plan text NOT NULL REFERENCES plans, price_cents bigint NOT NULL,
    fence_token bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS price_changes (
    batch_id bigint NOT NULL, item text NOT NULL, user_id bigint NOT NULL,
    old_cents bigint NOT NULL, new_cents bigint NOT NULL, token bigint NOT NULL);
CREATE TABLE IF NOT EXISTS backfill_summaries (
    batch_id bigint NOT NULL, run text NOT NULL, users bigint NOT NULL,
    old_cents bigint NOT NULL, new_cents bigint NOT NULL, at timestamptz NOT NULL DEFAULT now());
INSERT INTO plans VALUES ('free', 0), ('basic', 900), ('pro', 2900), ('team', 9900) ON CONFLICT DO NOTHING;
`

// seed fills an empty users table with $1 users on four plans, at last
// year's prices. It changes nothing on a database seeded before.
const seed = `
INSERT INTO users (id, plan, price_cents)
SELECT i, p.name, p.old
FROM generate_series(1, $1::bigint) AS i
JOIN (VALUES (0, 'free', 0), (1, 'basic', 700), (2, 'pro', 2500), (3, 'team', 8900)) AS p(n, name, old) ON p.n = i % 4
WHERE NOT EXISTS (SELECT FROM users);
`

// users is the target table of the fenced write.
var users = fence.Table{Name: "users", KeyColumn: "id", TokenColumn: "fence_token"}

// reprice re-prices one user in the item's transaction. Its effects (the
// audit row and the user's new price) commit with the item's completion
// and the partition's fence check, or not at all; the price is also a
// conditional write on the user's row (fence.Table), so that a worker that
// paused past its lease cannot overwrite a row written under a newer
// token.
func reprice(ctx context.Context, tx pgx.Tx, w *queue.Work[Reprice]) error {
	// Lock the row first: the old price read is the one the update replaces.
	var old, price int64
	if err := tx.QueryRow(ctx, `
		SELECT u.price_cents, p.price_cents FROM users AS u JOIN plans AS p ON p.name = u.plan
		WHERE u.id = $1 FOR UPDATE OF u`, w.Args.User).Scan(&old, &price); err != nil {
		return err
	}
	if err := users.Update(ctx, tx, w.Args.User, w.Token, `price_cents = $3`, price); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO price_changes (batch_id, item, user_id, old_cents, new_cents, token) VALUES ($1, $2, $3, $4, $5, $6)`,
		w.Batch, w.Item, w.Args.User, old, price, int64(w.Token))
	return err
}

// summarize writes the run's summary row, in the follow-up's transaction:
// it runs once, after every item finished, so the audit rows it adds up
// are final.
func summarize(ctx context.Context, tx pgx.Tx, w *queue.Work[Summarize]) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO backfill_summaries (batch_id, run, users, old_cents, new_cents)
		SELECT $1, $2, count(*), coalesce(sum(old_cents), 0), coalesce(sum(new_cents), 0)
		FROM price_changes WHERE batch_id = $1`, w.Batch, w.Args.Run)
	return err
}

// item is the batch item of user id: its item key is the user id, so that
// a producer submitting again adds nothing twice. A keyless item's
// partition follows from its item key, so each user's row is written by
// one partition's owners only, whose tokens only grow: a row written
// under a token from another partition could refuse a later owner's.
func item(id int64) queue.Item {
	return queue.Item{ID: strconv.FormatInt(id, 10), Args: Reprice{User: id}}
}
