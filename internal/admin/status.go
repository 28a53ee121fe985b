package admin

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// Status is the status report, as `leasehold status --json` prints it.
type Status struct {
	// Now is the database time the report is relative to.
	Now    time.Time     `json:"now"`
	Groups []GroupStatus `json:"groups"`
}

// GroupStatus is the status of one group: its partitions, members and
// waiting keys, and their totals.
type GroupStatus struct {
	Group          string `json:"group"`
	PartitionCount int    `json:"partition_count"`
	Held           int    `json:"held"`         // partitions whose lease is unexpired
	LiveMembers    int    `json:"live_members"` // members whose heartbeat is unexpired
	Pending        int64  `json:"pending"`
	Scheduled      int64  `json:"scheduled"`
	Retrying       int64  `json:"retrying"`
	// OldestDueMS is the largest OldestDueMS of the partitions.
	OldestDueMS int64 `json:"oldest_due_ms"`
	// BacklogAt is when the pending jobs were counted (Pending, Scheduled,
	// Retrying, OldestDueMS, Waits), on the database clock: Now, unless the
	// backlog came from a cache (Options.Backlog).
	BacklogAt  time.Time         `json:"backlog_at"`
	Partitions []PartitionStatus `json:"partitions"`
	Members    []MemberStatus    `json:"members"`
	// Waits are the keys whose due jobs wait behind a job that is not due,
	// the most held up first, at most WaitsLimit.
	Waits []WaitStatus `json:"waits"`
	// Paused are the group's pauses: kind "" pauses the whole group.
	Paused []PauseStatus `json:"paused"`
	// Running is how many jobs run now, as their partitions' owners
	// published them (at most a publish interval late; see
	// docs/running.md); Workers breaks it down by worker.
	Running int             `json:"running"`
	Workers []RunningStatus `json:"running_workers"`
	// Outbox is what waits in the group's fenced outbox to be published
	// to Kafka (ReadOutbox); nil when no handler of the group ever
	// appended to it, and when Options.NoOutbox left it unread.
	Outbox *OutboxStatus `json:"outbox"`
	// Limits are the keys held back by limits (the LimitsShown busiest),
	// the jobs held back per limit and the limits the kinds declare
	// (ReadLimits); nil when Options.NoLimits left them unread.
	Limits *LimitsStatus `json:"limits"`
}

// RunningStatus is what one worker of a group runs now.
type RunningStatus struct {
	Worker     string `json:"worker"`
	Partitions []int  `json:"partitions"` // the partitions it runs jobs of
	Running    int    `json:"running"`
	// Since is the start of its longest-running job.
	Since time.Time `json:"since"`
}

// PartitionStatus is the status of one partition: its lease and its jobs.
type PartitionStatus struct {
	Partition   int    `json:"partition"`
	Owner       string `json:"owner"`       // member id of the lease's holder; "" if never granted
	Incarnation string `json:"incarnation"` // the holder's incarnation
	Token       int64  `json:"token"`       // the latest grant's fencing token; 0 if never granted
	Held        bool   `json:"held"`
	// Released reports a lease that its holder released (a graceful stop,
	// a handoff) rather than let expire; Held is false then.
	Released   bool       `json:"released"`
	Desired    string     `json:"desired"` // the owner the assignment wants among the live members
	AcquiredAt *time.Time `json:"acquired_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	// ExpiresInMS is the time left on the lease; negative once expired.
	ExpiresInMS *int64 `json:"expires_in_ms"`
	Pending     int64  `json:"pending"`
	Scheduled   int64  `json:"scheduled"`
	Retrying    int64  `json:"retrying"`
	OldestDueMS int64  `json:"oldest_due_ms"`
	// Running is how many of its jobs run now (see GroupStatus.Running).
	Running int `json:"running"`
}

// MemberStatus is the status of one member of a group.
type MemberStatus struct {
	ID             string    `json:"id"`
	Incarnation    string    `json:"incarnation"`
	Live           bool      `json:"live"`
	JoinedAt       time.Time `json:"joined_at"`
	HeartbeatAt    time.Time `json:"heartbeat_at"`
	HeartbeatAgeMS int64     `json:"heartbeat_age_ms"`
	ExpiresAt      time.Time `json:"expires_at"`
	// Partitions are the partitions whose unexpired lease this incarnation
	// holds.
	Partitions []int `json:"partitions"`
}

// Idle reports whether a partition is uninteresting: held by the owner the
// assignment wants, with no pending job.
func (p PartitionStatus) Idle() bool {
	return p.Held && p.Owner == p.Desired && p.Pending == 0 && p.Scheduled == 0
}

// ReadStatus reads the status of groups, or of every group if none, with
// times relative to the database clock. It counts every group's backlog
// and waiting keys as it reads, and reads its outbox (ReadOutbox) and its
// limits (ReadLimits): see
// ReadStatusWith for a cheaper read.
func ReadStatus(ctx context.Context, db *leasehold.DB, groups []string) (Status, error) {
	return ReadStatusWith(ctx, db, groups, Options{})
}

// Options change what ReadStatusWith reads.
type Options struct {
	// NoWaits leaves GroupStatus.Waits empty, for reports that do not show
	// them: reading them walks the group's keyed backlog.
	NoWaits bool
	// Backlog reads a group's backlog (its pending jobs' counts, and its
	// waiting keys when waits is true); a cache of ReadBacklog, typically.
	// Nil reads it with ReadBacklog for each group.
	Backlog func(ctx context.Context, group string, waits bool) (Backlog, error)
	// NoOutbox leaves GroupStatus.Outbox nil, for reports that do not
	// show it or read it apart (ReadOutbox).
	NoOutbox bool
	// NoLimits leaves GroupStatus.Limits nil, for reports that do not show
	// them or read them apart (ReadLimits).
	NoLimits bool
}

// ReadStatusWith is ReadStatus with options: the web UI reads the backlog,
// whose cost follows the number of pending jobs, from a cache.
func ReadStatusWith(ctx context.Context, db *leasehold.DB, groups []string, o Options) (Status, error) {
	if len(groups) == 0 {
		var err error
		if groups, err = partition.Groups(ctx, db); err != nil {
			return Status{}, err
		}
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return Status{}, err
	}
	now, err := dbNow(ctx, db)
	if err != nil {
		return Status{}, err
	}
	backlog := o.Backlog
	if backlog == nil { // counted now: at the report's time
		backlog = func(ctx context.Context, g string, waits bool) (Backlog, error) {
			return readBacklog(ctx, q, g, waits, now)
		}
	}
	rep := Status{Now: now, Groups: []GroupStatus{}}
	for _, g := range groups {
		st, err := partition.Inspect(ctx, db, g)
		if err != nil {
			return Status{}, err
		}
		b, err := backlog(ctx, g, !o.NoWaits)
		if err != nil {
			return Status{}, err
		}
		running, err := q.Running(ctx, g)
		if err != nil {
			return Status{}, err
		}
		gs := groupOf(st, b.Stats, now)
		gs.BacklogAt = b.ReadAt
		gs.Waits = []WaitStatus{}
		if !o.NoWaits {
			gs.Waits = waitsOf(b.Waits, now)
		}
		runningOf(&gs, running)
		if gs.Paused, err = pausesOf(ctx, q, g); err != nil {
			return Status{}, err
		}
		if !o.NoOutbox {
			if gs.Outbox, err = ReadOutbox(ctx, db, gs); err != nil {
				return Status{}, err
			}
		}
		if !o.NoLimits {
			if gs.Limits, err = ReadLimits(ctx, db, g, LimitsShown); err != nil {
				return Status{}, err
			}
		}
		rep.Groups = append(rep.Groups, gs)
	}
	return rep, nil
}

func groupOf(st partition.Status, stats []queue.PartitionStats, now time.Time) GroupStatus {
	g := GroupStatus{Group: st.Group, PartitionCount: len(st.Partitions),
		Partitions: make([]PartitionStatus, len(st.Partitions)), Members: make([]MemberStatus, len(st.Members))}
	for i, ps := range st.Partitions {
		p := PartitionStatus{Partition: ps.Partition, Owner: ps.Owner, Incarnation: ps.Incarnation,
			Token: int64(ps.Token), Held: ps.Held, Released: ps.Released && !ps.Held, Desired: ps.Desired}
		if ps.Owner != "" {
			in := ps.Expires.Sub(now).Milliseconds()
			p.AcquiredAt, p.ExpiresAt, p.ExpiresInMS = &ps.Acquired, &ps.Expires, &in
		}
		if i < len(stats) && stats[i].Partition == ps.Partition {
			s := stats[i]
			p.Pending, p.Scheduled, p.Retrying, p.OldestDueMS = s.Pending, s.Scheduled, s.Retrying, s.OldestDue.Milliseconds()
		}
		if p.Held {
			g.Held++
		}
		g.Pending += p.Pending
		g.Scheduled += p.Scheduled
		g.Retrying += p.Retrying
		g.OldestDueMS = max(g.OldestDueMS, p.OldestDueMS)
		g.Partitions[i] = p
	}
	for i, ms := range st.Members {
		m := MemberStatus{ID: ms.ID, Incarnation: ms.Incarnation, Live: ms.Live, JoinedAt: ms.Joined,
			HeartbeatAt: ms.Heartbeat, HeartbeatAgeMS: now.Sub(ms.Heartbeat).Milliseconds(), ExpiresAt: ms.Expires,
			Partitions: []int{}}
		for _, p := range g.Partitions {
			if p.Held && p.Owner == m.ID && p.Incarnation == m.Incarnation {
				m.Partitions = append(m.Partitions, p.Partition)
			}
		}
		if m.Live {
			g.LiveMembers++
		}
		g.Members[i] = m
	}
	return g
}

// runningOf adds the running jobs to g's counts: per partition and per
// worker, in worker order.
func runningOf(g *GroupStatus, running []queue.RunningJob) {
	g.Workers = []RunningStatus{}
	by := map[string]*RunningStatus{}
	for _, j := range running {
		g.Running++
		for i := range g.Partitions {
			if g.Partitions[i].Partition == j.Partition {
				g.Partitions[i].Running++
			}
		}
		w := by[j.Worker]
		if w == nil {
			w = &RunningStatus{Worker: j.Worker, Partitions: []int{}, Since: j.Since}
			by[j.Worker] = w
		}
		w.Running++
		if !slices.Contains(w.Partitions, j.Partition) {
			w.Partitions = append(w.Partitions, j.Partition)
		}
		if j.Since.Before(w.Since) {
			w.Since = j.Since
		}
	}
	for _, w := range by {
		slices.Sort(w.Partitions)
		g.Workers = append(g.Workers, *w)
	}
	slices.SortFunc(g.Workers, func(a, b RunningStatus) int { return strings.Compare(a.Worker, b.Worker) })
}
