package periodic

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

// Info describes a declared schedule, as List reports it.
type Info struct {
	// Group and Name identify the schedule.
	Group, Name string
	// Spec is the cron expression (and its time zone), or "every <d>".
	Spec string
	// Policy is the schedule's MissedPolicy: "run-once" or "skip".
	Policy string
	// Since is when a leader first declared the schedule: its first slot
	// is the next one after it.
	Since time.Time
	// Next is the next slot to enqueue, as of the leader's last
	// transaction; zero before the first.
	Next time.Time
	// DeclaredAt is when a leader last declared the schedule.
	DeclaredAt time.Time
	// LastSlot is the latest slot recorded, zero for none; LastJobID its
	// job (0 if it was skipped, or its job was a duplicate of a pending job
	// with the same UniqueKey), LastSkipped whether it was skipped (under
	// MissedSkip), LastToken the leader's token, and LastMissed the slots
	// before it that no leader enqueued.
	LastSlot    time.Time
	LastJobID   int64
	LastSkipped bool
	LastToken   fence.Token
	LastMissed  int
	// MissedTotal counts the slots no leader enqueued since the schedule
	// was first declared.
	MissedTotal int64
	// Leader is the holder of the group's leader lease and LeaderToken its
	// token; LeaderLive is false when the lease has expired or was
	// released (no scheduler leads).
	Leader      string
	LeaderToken fence.Token
	LeaderLive  bool
}

// List returns the schedules recorded in db for group (every group when
// group is ""), by group then name. A schedule is recorded when a leader
// first declares it.
func List(ctx context.Context, db *leasehold.DB, group string) ([]Info, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var g *string
	if group != "" {
		g = &group
	}
	rows, err := db.Pool().Query(ctx, st.Periodic.List, g, LeasePrefix)
	if err != nil {
		return nil, store.ClassifyRead("periodic", "list", group, err)
	}
	defer rows.Close()
	out := []Info{}
	for rows.Next() {
		var in Info
		var next, last *time.Time
		var job, token, missed, ltoken *int64
		var skipped *bool
		var owner *string
		var now time.Time
		if err := rows.Scan(&in.Group, &in.Name, &in.Spec, &in.Policy, &in.Since, &next, &in.DeclaredAt,
			&last, &job, &token, &missed, &skipped, &in.MissedTotal, &owner, &ltoken, &in.LeaderLive, &now); err != nil {
			return nil, store.ClassifyRead("periodic", "list", group, err)
		}
		if next != nil {
			in.Next = *next
		}
		if last != nil {
			in.LastSlot = *last
		}
		if job != nil {
			in.LastJobID = *job
		}
		if token != nil {
			in.LastToken, in.LastMissed, in.LastSkipped = fence.Token(*token), int(*missed), *skipped
		}
		if owner != nil {
			in.Leader, in.LeaderToken = *owner, fence.Token(*ltoken)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, store.ClassifyRead("periodic", "list", group, err)
	}
	return out, nil
}
