package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// The conditional offset write on its own, below the lease check: it
// applies only from the value the owner read, with a token no lower than
// the last writer's, and tells a newer owner (fenced) from a moved offset.
func TestAdvanceIsConditional(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := New(pgtest.DBOn(t, pool), Config{Topics: []string{"t"}, Brokers: []string{"127.0.0.1:1"},
		Handler: func(context.Context, pgx.Tx, *Batch) error { return nil }})
	pgtest.Must(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 64)`)
	pgtest.Must(t, err)
	at := func(v int64) *int64 { return &v }
	set := func(p int32, next, token int64) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO leasehold.kafka_offsets (group_name, topic, partition, next_offset, token)
			VALUES ('g', 't', $1, $2, $3)`, p, next, token)
		pgtest.Must(t, err)
	}
	advance := func(p int32, token int64, prev *int64, next int64) error {
		t.Helper()
		tx, err := pool.Begin(ctx)
		pgtest.Must(t, err)
		defer tx.Rollback(ctx)
		if err := c.advance(ctx, tx, "g", "t", p, fence.Token(token), prev, next); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	stored := func(p int32) (int64, int64) {
		t.Helper()
		next, token, ok, err := c.stored(ctx, pool, "g", "t", p)
		pgtest.Must(t, err)
		if !ok {
			return -1, -1
		}
		return next, token
	}
	for i, tc := range []struct {
		name      string
		row       []int64 // next_offset, token of the existing row; nil: none
		token     int64
		prev      *int64
		fenced    bool
		moved     bool
		wantNext  int64
		wantToken int64
	}{
		{name: "first write", token: 7, prev: nil, wantNext: 20, wantToken: 7},
		{name: "from the value read", row: []int64{10, 5}, token: 7, prev: at(10), wantNext: 20, wantToken: 7},
		{name: "same token", row: []int64{10, 7}, token: 7, prev: at(10), wantNext: 20, wantToken: 7},
		{name: "a row appeared", row: []int64{10, 5}, token: 7, prev: nil, moved: true, wantNext: 10, wantToken: 5},
		{name: "a row appeared, newer", row: []int64{10, 9}, token: 7, prev: nil, fenced: true, wantNext: 10, wantToken: 9},
		{name: "moved under the owner", row: []int64{10, 5}, token: 7, prev: at(8), moved: true, wantNext: 10, wantToken: 5},
		{name: "newer token, same offset", row: []int64{10, 9}, token: 7, prev: at(10), fenced: true, wantNext: 10, wantToken: 9},
		{name: "newer token, moved", row: []int64{12, 9}, token: 7, prev: at(10), fenced: true, wantNext: 12, wantToken: 9},
		{name: "row deleted", token: 7, prev: at(10), moved: true, wantNext: -1, wantToken: -1},
	} {
		p := int32(i)
		_, err := pool.Exec(ctx, `DELETE FROM leasehold.kafka_offsets WHERE partition = $1`, p)
		pgtest.Must(t, err)
		if tc.row != nil {
			set(p, tc.row[0], tc.row[1])
		}
		err = advance(p, tc.token, tc.prev, 20)
		switch {
		case tc.fenced:
			var fe *fence.FencedError
			if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || int64(fe.Current) != tc.row[1] {
				t.Errorf("%s: got %v, want a *fence.FencedError naming token %d", tc.name, err, tc.row[1])
			}
		case tc.moved:
			if !errors.Is(err, ErrOffsetMoved) {
				t.Errorf("%s: got %v, want ErrOffsetMoved", tc.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		}
		if next, token := stored(p); next != tc.wantNext || token != tc.wantToken {
			t.Errorf("%s: stored (%d, token %d), want (%d, token %d)", tc.name, next, token, tc.wantNext, tc.wantToken)
		}
	}
}
