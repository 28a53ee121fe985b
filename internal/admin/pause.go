package admin

import (
	"context"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/queue"
)

// PauseStatus is a pause, as `leasehold status --json` prints it.
type PauseStatus struct {
	// Kind is the paused kind; "" when the whole group is paused.
	Kind   string `json:"kind"`
	At     string `json:"paused_at"`
	By     string `json:"paused_by"`
	Reason string `json:"reason"`
}

// Pause pauses group (kind "") or one kind of it (see queue.Client.Pause).
func Pause(ctx context.Context, db *leasehold.DB, group, kind, reason string) error {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return err
	}
	return q.Pause(ctx, group, kind, reason)
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
		out[i] = PauseStatus{Kind: p.Kind, At: p.At.UTC().Format("2006-01-02T15:04:05Z07:00"), By: p.By, Reason: p.Reason}
	}
	return out, nil
}
