package main

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/queue"
)

// errCrash is the simulated crash of the producer (config.CrashAfter).
var errCrash = errors.New("simulated crash")

// userItems yields an item per user, in id order, reading the ids in
// keyset pages of page rows (WHERE id > last ORDER BY id LIMIT page): one
// page in memory at a time, whatever the table's size, and each page read
// from the index. After crashAfter items (0: never) it yields errCrash,
// which ends SubmitItems there: the chunk it was building is lost, as in
// a real crash, and the chunks before it are committed.
func userItems(ctx context.Context, pool *pgxpool.Pool, page, crashAfter int) iter.Seq2[queue.Item, error] {
	return func(yield func(queue.Item, error) bool) {
		var last int64
		n := 0
		for {
			rows, err := pool.Query(ctx, `SELECT id FROM users WHERE id > $1 ORDER BY id LIMIT $2`, last, page)
			if err != nil {
				yield(queue.Item{}, fmt.Errorf("read users after %d: %w", last, err))
				return
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				yield(queue.Item{}, fmt.Errorf("read users after %d: %w", last, err))
				return
			}
			for _, id := range ids {
				if crashAfter > 0 && n == crashAfter {
					yield(queue.Item{}, errCrash)
					return
				}
				if !yield(item(id), nil) {
					return
				}
				n++
			}
			if len(ids) < page {
				return
			}
			last = ids[len(ids)-1]
		}
	}
}
