package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// statusReport is what `leasehold status --json` prints.
type statusReport struct {
	// Now is the database time the report is relative to.
	Now    time.Time     `json:"now"`
	Groups []groupStatus `json:"groups"`
}

type groupStatus struct {
	Group          string `json:"group"`
	PartitionCount int    `json:"partition_count"`
	Held           int    `json:"held"`         // partitions whose lease is unexpired
	LiveMembers    int    `json:"live_members"` // members whose heartbeat is unexpired
	Pending        int64  `json:"pending"`
	Scheduled      int64  `json:"scheduled"`
	Retrying       int64  `json:"retrying"`
	// OldestDueMS is the largest OldestDueMS of the partitions.
	OldestDueMS int64             `json:"oldest_due_ms"`
	Partitions  []partitionStatus `json:"partitions"`
	Members     []memberStatus    `json:"members"`
	// Waits are the keys whose due jobs wait behind a job that is not due,
	// the most held up first, at most waitsLimit.
	Waits []waitStatus `json:"waits"`
}

type partitionStatus struct {
	Partition   int        `json:"partition"`
	Owner       string     `json:"owner"`       // member id of the lease's holder; "" if never granted
	Incarnation string     `json:"incarnation"` // the holder's incarnation
	Token       int64      `json:"token"`       // the latest grant's fencing token; 0 if never granted
	Held        bool       `json:"held"`
	Desired     string     `json:"desired"` // the owner the assignment wants among the live members
	AcquiredAt  *time.Time `json:"acquired_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	// ExpiresInMS is the time left on the lease; negative once expired.
	ExpiresInMS *int64 `json:"expires_in_ms"`
	Pending     int64  `json:"pending"`
	Scheduled   int64  `json:"scheduled"`
	Retrying    int64  `json:"retrying"`
	OldestDueMS int64  `json:"oldest_due_ms"`
}

type memberStatus struct {
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

// idle reports whether a partition is uninteresting: held by the owner the
// assignment wants, with no pending job.
func (p partitionStatus) idle() bool {
	return p.Held && p.Owner == p.Desired && p.Pending == 0 && p.Scheduled == 0
}

// listAllBelow is the partition count up to which the table lists every
// partition without --all.
const listAllBelow = 32

func newStatusCmd() *cobra.Command {
	var db dbFlags
	var groups []string
	var all bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show partition owners, leases, job backlogs and members",
		Long: "status shows, per group (every group unless --group names some), each partition's owner, fencing\n" +
			"token, lease expiry and pending jobs, the keys whose due jobs wait behind a job that is not due\n" +
			"(the 5 most held up), and each member's partitions and last heartbeat. Times are relative to the\n" +
			"database clock. Groups of more than 32 partitions list only the partitions that are not idle\n" +
			"(idle: held by their desired owner, no pending job) unless --all; --json gives everything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, ctx, done, err := db.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			rep, err := readStatus(ctx, h, groups)
			if err != nil {
				return dbErr(ctx, err)
			}
			if db.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			return rep.print(cmd.OutOrStdout(), all)
		},
	}
	db.add(cmd, false)
	cmd.Flags().StringArrayVar(&groups, "group", nil, "show this group (repeatable; default every group)")
	cmd.Flags().BoolVar(&all, "all", false, "list every partition, idle ones too")
	return cmd
}

// readStatus reads the status of groups, or of every group if none.
func readStatus(ctx context.Context, h *leasehold.DB, groups []string) (statusReport, error) {
	pool := h.Pool()
	if len(groups) == 0 {
		var err error
		if groups, err = partition.Groups(ctx, h); err != nil {
			return statusReport{}, err
		}
	}
	q, err := queue.New(h, queue.Config{})
	if err != nil {
		return statusReport{}, err
	}
	now, err := dbNow(ctx, pool)
	if err != nil {
		return statusReport{}, err
	}
	rep := statusReport{Now: now, Groups: []groupStatus{}}
	for _, g := range groups {
		st, err := partition.Inspect(ctx, h, g)
		if err != nil {
			return statusReport{}, err
		}
		stats, err := q.Stats(ctx, g)
		if err != nil {
			return statusReport{}, err
		}
		waits, err := q.Waits(ctx, g, waitsLimit)
		if err != nil {
			return statusReport{}, err
		}
		gs := groupOf(st, stats, now)
		gs.Waits = waitsOf(waits, now)
		rep.Groups = append(rep.Groups, gs)
	}
	return rep, nil
}

func groupOf(st partition.Status, stats []queue.PartitionStats, now time.Time) groupStatus {
	g := groupStatus{Group: st.Group, PartitionCount: len(st.Partitions),
		Partitions: make([]partitionStatus, len(st.Partitions)), Members: make([]memberStatus, len(st.Members))}
	for i, ps := range st.Partitions {
		p := partitionStatus{Partition: ps.Partition, Owner: ps.Owner, Incarnation: ps.Incarnation,
			Token: int64(ps.Token), Held: ps.Held, Desired: ps.Desired}
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
		m := memberStatus{ID: ms.ID, Incarnation: ms.Incarnation, Live: ms.Live, JoinedAt: ms.Joined,
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

// print writes the report as tables; with all, every partition is listed.
func (r statusReport) print(w io.Writer, all bool) error {
	if len(r.Groups) == 0 {
		fmt.Fprintln(w, "no groups yet (a worker creates its group when it starts)")
		return nil
	}
	for i, g := range r.Groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := g.print(w, all); err != nil {
			return err
		}
	}
	return nil
}

func (g groupStatus) print(w io.Writer, all bool) error {
	oldest := "-"
	if g.OldestDueMS > 0 {
		oldest = human(time.Duration(g.OldestDueMS) * time.Millisecond)
	}
	fmt.Fprintf(w, "group %s: %d partitions (%d held), members: %d live; jobs: %d pending, %d scheduled, %d retrying; oldest due %s\n\n",
		g.Group, g.PartitionCount, g.Held, g.LiveMembers, g.Pending, g.Scheduled, g.Retrying, oldest)
	t := newTable(w, "PARTITION", "OWNER", "TOKEN", "EXPIRES IN", "PENDING", "RETRYING", "SCHEDULED", "OLDEST DUE")
	hidden := 0
	for _, p := range g.Partitions {
		if !all && g.PartitionCount > listAllBelow && p.idle() {
			hidden++
			continue
		}
		owner, token, expires := "-", "-", "-"
		if p.Owner != "" {
			owner, token = p.Owner, fmt.Sprint(p.Token)
			left := time.Duration(*p.ExpiresInMS) * time.Millisecond
			if p.Held {
				expires = human(left)
			} else {
				expires = "expired " + human(-left) + " ago"
			}
		}
		if p.Desired != "" && (p.Desired != p.Owner || !p.Held) {
			owner += " (desired " + orDash(p.Desired) + ")"
		}
		oldest := "-"
		if p.OldestDueMS > 0 {
			oldest = human(time.Duration(p.OldestDueMS) * time.Millisecond)
		}
		t.row(p.Partition, owner, token, expires, p.Pending, p.Retrying, p.Scheduled, oldest)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%d idle partitions not listed: held by their desired owner, no pending job; --all lists them)\n", hidden)
	}
	fmt.Fprintln(w)
	if err := printWaits(w, g.Waits); err != nil {
		return err
	}
	if len(g.Members) == 0 {
		fmt.Fprintln(w, "no members")
		return nil
	}
	t = newTable(w, "MEMBER", "INCARNATION", "LIVE", "PARTITIONS", "LAST HEARTBEAT")
	for _, m := range g.Members {
		live := "yes"
		if !m.Live {
			live = "no"
		}
		t.row(m.ID, m.Incarnation, live, len(m.Partitions), human(time.Duration(m.HeartbeatAgeMS)*time.Millisecond)+" ago")
	}
	return t.flush()
}
