package main

import (
	"context"

	"github.com/leasehold/leasehold/fence"
)

// outcome is what a run left in the tables, for batch BatchID.
type outcome struct {
	BatchID    int64
	Users      int64 // users in the table
	Changes    int64 // audit rows of the batch: one per re-pricing
	Missed     int64 // users the batch did not re-price
	Twice      int64 // users it re-priced more than once
	WrongPrice int64 // users whose price is not their plan's
	Summaries  int64 // summary rows of the batch
	// The (first) summary row's figures.
	SummaryUsers, OldCents, NewCents int64
}

// ok reports whether every user was re-priced exactly once and the summary
// written once, agreeing with the audit rows.
func (o outcome) ok() bool {
	return o.Changes == o.Users && o.Missed == 0 && o.Twice == 0 && o.WrongPrice == 0 &&
		o.Summaries == 1 && o.SummaryUsers == o.Changes
}

// check reads the outcome of batch id from the tables (not from the
// queue): each re-pricing left an audit row, so a duplicate shows.
func check(ctx context.Context, db fence.Querier, id int64) (outcome, error) {
	o := outcome{BatchID: id}
	err := db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM users),
		       (SELECT count(*) FROM price_changes WHERE batch_id = $1),
		       (SELECT count(*) FROM users AS u
		        WHERE NOT EXISTS (SELECT FROM price_changes AS c WHERE c.batch_id = $1 AND c.user_id = u.id)),
		       (SELECT count(*) FROM (SELECT FROM price_changes WHERE batch_id = $1 GROUP BY user_id HAVING count(*) > 1) AS d),
		       (SELECT count(*) FROM users AS u JOIN plans AS p ON p.name = u.plan WHERE u.price_cents <> p.price_cents),
		       (SELECT count(*) FROM backfill_summaries WHERE batch_id = $1),
		       coalesce(s.users, 0), coalesce(s.old_cents, 0), coalesce(s.new_cents, 0)
		FROM (SELECT 1) AS one
		LEFT JOIN LATERAL (SELECT * FROM backfill_summaries WHERE batch_id = $1 ORDER BY at LIMIT 1) AS s ON true`, id,
	).Scan(&o.Users, &o.Changes, &o.Missed, &o.Twice, &o.WrongPrice, &o.Summaries, &o.SummaryUsers, &o.OldCents, &o.NewCents)
	return o, err
}
