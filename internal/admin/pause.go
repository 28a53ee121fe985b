package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// PauseStatus is a pause, as `leasehold status --json` prints it.
type PauseStatus struct {
	// Kind is the paused kind; "" when the whole group is paused.
	Kind   string    `json:"kind"`
	At     time.Time `json:"paused_at"`
	By     string    `json:"paused_by"`
	Reason string    `json:"reason"`
}

// Pause pauses group (kind "") or one kind of it (see queue.Client.Pause).
// It reports whether kind is known: "" or a kind some worker of the group
// recorded a handler for (table group_kinds). An unknown kind is paused
// all the same (an operator may pause a kind before deploying its
// handler), but may be a typo, which pauses nothing that runs.
func Pause(ctx context.Context, db *leasehold.DB, group, kind, reason string) (known bool, err error) {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return false, err
	}
	if err := q.Pause(ctx, group, kind, reason); err != nil {
		return false, err
	}
	if kind == "" {
		return true, nil
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return false, err
	}
	rows, err := db.Pool().Query(ctx, st.Batch.Kinds, group, []string{kind})
	if err != nil {
		return false, fmt.Errorf("admin: the kinds of group %q: %w", group, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("admin: the kinds of group %q: %w", group, err)
	}
	return len(found) > 0, nil
}

// Resume resumes group (kind "") or one kind of it (see
// queue.Client.Resume).
func Resume(ctx context.Context, db *leasehold.DB, group, kind string) error {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return err
	}
	return q.Resume(ctx, group, kind)
}

// pausesOf reads the pauses of group for the status report.
func pausesOf(ctx context.Context, q *queue.Client, group string) ([]PauseStatus, error) {
	ps, err := q.Paused(ctx, group)
	if err != nil {
		return nil, err
	}
	out := make([]PauseStatus, len(ps))
	for i, p := range ps {
		out[i] = PauseStatus{Kind: p.Kind, At: p.At.UTC(), By: p.By, Reason: p.Reason}
	}
	return out, nil
}
