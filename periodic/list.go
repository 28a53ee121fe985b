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
	// Recent are the schedule's latest recorded slots, newest first: at
	// most RecentSlots of them, within Config.Retention (each schedule's
	// latest is always kept). Recent[0] is the LastSlot.
	Recent []SlotInfo
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

// RecentSlots is how many of each schedule's latest slots List reports
// (Info.Recent).
const RecentSlots = 10

// SlotInfo is a recorded slot, as List reports it.
type SlotInfo struct {
	// At is the slot, in UTC.
	At time.Time
	// JobID is its job; 0 if it was skipped, or its job was a duplicate of
	// a pending job with the same UniqueKey.
	JobID int64
	// Skipped is true for a slot recorded but not enqueued (MissedSkip).
	Skipped bool
	// Token is the token of the leader that recorded it.
	Token fence.Token
	// Missed is how many earlier slots no leader enqueued that it
	// accounts for.
	Missed int
	// RecordedAt is when it was recorded, by the database's clock.
	RecordedAt time.Time
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
	rows, err := db.Pool().Query(ctx, st.Periodic.List, g, LeasePrefix, RecentSlots)
	if err != nil {
		return nil, store.ClassifyRead("periodic", "list", group, err)
	}
	defer rows.Close()
	out := []Info{}
	for rows.Next() {
		var in Info
		var next *time.Time
		var slots, recorded []time.Time
		var jobs, tokens []int64
		var missed []int32
		var skipped []bool
		var owner *string
		var ltoken *int64
		var now time.Time
		if err := rows.Scan(&in.Group, &in.Name, &in.Spec, &in.Policy, &in.Since, &next, &in.DeclaredAt,
			&slots, &jobs, &tokens, &missed, &skipped, &recorded, &in.MissedTotal, &owner, &ltoken, &in.LeaderLive,
			&now); err != nil {
			return nil, store.ClassifyRead("periodic", "list", group, err)
		}
		if next != nil {
			in.Next = *next
		}
		for k, at := range slots {
			in.Recent = append(in.Recent, SlotInfo{At: at.UTC(), JobID: jobs[k], Skipped: skipped[k],
				Token: fence.Token(tokens[k]), Missed: int(missed[k]), RecordedAt: recorded[k]})
		}
		if len(in.Recent) > 0 {
			r := in.Recent[0]
			in.LastSlot, in.LastJobID, in.LastSkipped, in.LastToken, in.LastMissed = r.At, r.JobID, r.Skipped, r.Token, r.Missed
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
