package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

// stored reads a partition's stored offset; ok is false when none is stored.
func (c *Consumer) stored(ctx context.Context, db fence.Querier, group, topic string, p int32) (next, token int64, ok bool, err error) {
	err = db.QueryRow(ctx, c.q.Read, group, topic, p).Scan(&next, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("kafka: read the stored offset of %s/%d: %w", topic, p, err)
	}
	return next, token, true, nil
}

// advance moves group's stored offset from prev (nil: none stored) to next
// inside tx, which has passed the fence check. A refusal is a
// *fence.FencedError when a newer token wrote the offset, ErrOffsetMoved
// otherwise.
func (c *Consumer) advance(ctx context.Context, tx pgx.Tx, group, topic string, p int32, token fence.Token, prev *int64, next int64) error {
	var n int
	if err := tx.QueryRow(ctx, c.q.Advance, group, topic, p, next, int64(token), prev).Scan(&n); err != nil {
		return fmt.Errorf("kafka: advance the offset of %s/%d to %d: %w", topic, p, next, err)
	}
	if n == 1 {
		return nil
	}
	cur, curToken, ok, err := c.stored(ctx, tx, group, topic, p)
	if err != nil {
		return err
	}
	if ok && fence.Token(curToken) > token {
		return &fence.FencedError{Resource: fmt.Sprintf("kafka offset %s %s/%d", group, topic, p),
			Held: token, Current: fence.Token(curToken), Reason: "a newer owner advanced the offset"}
	}
	was := "none"
	if prev != nil {
		was = fmt.Sprint(*prev)
	}
	now := "none"
	if ok {
		now = fmt.Sprint(cur)
	}
	return fmt.Errorf("%w: %s/%d: read %s, now %s", ErrOffsetMoved, topic, p, was, now)
}

// Offset is a partition's stored offset.
type Offset struct {
	Topic     string
	Partition int32
	// Next is the offset of the next record to process.
	Next int64
	// Token is the fencing token of the grant that stored it.
	Token fence.Token
}

// Offsets returns the stored offsets of group in db, ordered by topic and
// partition.
func Offsets(ctx context.Context, db *leasehold.DB, group string) ([]Offset, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	rows, err := db.Pool().Query(ctx, st.Kafka.List, group)
	if err != nil {
		return nil, store.ClassifyRead("kafka", "list offsets", group, err)
	}
	offs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Offset, error) {
		var o Offset
		var tok int64
		var at any
		err := r.Scan(&o.Topic, &o.Partition, &o.Next, &tok, &at)
		o.Token = fence.Token(tok)
		return o, err
	})
	if err != nil {
		return nil, store.ClassifyRead("kafka", "list offsets", group, err)
	}
	return offs, nil
}
