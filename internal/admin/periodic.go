package admin

import (
	"context"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/periodic"
)

// ScheduleInfo is a periodic schedule, as `leasehold periodic list --json`
// prints it. Times are absent when unknown.
type ScheduleInfo struct {
	Group     string     `json:"group"`
	Name      string     `json:"name"`
	Spec      string     `json:"spec"`
	Missed    string     `json:"missed_policy"`
	Since     time.Time  `json:"since"`
	Next      *time.Time `json:"next_slot,omitempty"`
	LastSlot  *time.Time `json:"last_slot,omitempty"`
	LastJobID int64      `json:"last_job_id,omitempty"`
	// LastOutcome is what became of the last slot: "enqueued", "skipped"
	// (under the skip policy) or "duplicate" (a pending job with the same
	// UniqueKey existed: none was enqueued); absent without a last slot.
	LastOutcome string `json:"last_outcome,omitempty"`
	LastToken   int64  `json:"last_token,omitempty"`
	LastMissed  int    `json:"last_missed"`
	// MissedTotal counts the slots no leader enqueued since the schedule
	// was first declared.
	MissedTotal int64 `json:"missed_total"`
	// Leader is the holder of the group's periodic lease ("" for none);
	// LeaderLive is false when it expired or was released.
	Leader      string `json:"leader,omitempty"`
	LeaderToken int64  `json:"leader_token,omitempty"`
	LeaderLive  bool   `json:"leader_live"`
}

// ListSchedules lists the periodic schedules of group ("" for all groups).
func ListSchedules(ctx context.Context, db *leasehold.DB, group string) ([]ScheduleInfo, error) {
	infos, err := periodic.List(ctx, db, group)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, 0, len(infos))
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	for _, in := range infos {
		outcome := ""
		switch {
		case in.LastSlot.IsZero():
		case in.LastJobID != 0:
			outcome = "enqueued"
		case in.LastSkipped:
			outcome = "skipped"
		default:
			outcome = "duplicate"
		}
		out = append(out, ScheduleInfo{LastOutcome: outcome,
			Group: in.Group, Name: in.Name, Spec: in.Spec, Missed: in.Policy, Since: in.Since.UTC(),
			Next: opt(in.Next), LastSlot: opt(in.LastSlot), LastJobID: in.LastJobID, LastToken: int64(in.LastToken),
			LastMissed: in.LastMissed, MissedTotal: in.MissedTotal,
			Leader: in.Leader, LeaderToken: int64(in.LeaderToken), LeaderLive: in.LeaderLive,
		})
	}
	return out, nil
}
