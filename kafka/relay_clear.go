package kafka

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
)

// ClearRefusal clears the refusal a relay recorded for partition of
// group's outbox (every refused partition of the group when partition is
// negative), and returns the partitions cleared. A refused partition is
// not published until then (see ProgressError). Clearing gives the
// partition's outbox a new identity: its relay (at its next attempt, at
// most RetryMax later) ignores every progress written before and
// publishes every segment the outbox holds, from then on committing
// progress of its own:
// segments the old progress covered that are still in the outbox (after a
// restore from a backup) are published again, duplicates rather than
// losses. To keep two deployments apart, give one a new
// TransactionalIDPrefix before clearing.
func ClearRefusal(ctx context.Context, db *leasehold.DB, group string, partition int) ([]int, error) {
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	var p *int
	if partition >= 0 {
		p = &partition
	}
	rows, err := db.Pool().Query(ctx, st.Outbox.Clear, group, p)
	if err != nil {
		return nil, store.Classify("outbox", "clear refusal", fmt.Sprintf("%s/%d", group, partition), err)
	}
	cleared, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, store.Classify("outbox", "clear refusal", fmt.Sprintf("%s/%d", group, partition), err)
	}
	return cleared, nil
}
