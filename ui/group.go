package ui

import (
	"net/http"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

// eventsShown is how many recent events the ownership map lists.
const eventsShown = 50

// groupData is the ownership map's: the group, its partitions, its recent
// events.
type groupData struct {
	G          admin.GroupStatus
	Partitions []partitionRow
	// Alerts counts the partitions marked as alerts.
	Alerts   int
	LagAlert time.Duration
	Events   []queue.Event
	EventErr string
	// Paused reports whether the whole group is paused.
	Paused bool
}

// partitionRow is a partition of the ownership map.
type partitionRow struct {
	admin.PartitionStatus
	// Reasons say why the partition is an alert: unowned, lease expired,
	// lagging; none when it is not.
	Reasons []string
	// Moving reports that the assignment wants another owner than the
	// holder: a handoff is due or under way.
	Moving bool
	Lag    time.Duration
}

func (h *Handler) group(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	if err := checkText("group", name, maxName); err != nil {
		h.failErr(w, r, err)
		return
	}
	st, err := admin.ReadStatusWith(r.Context(), h.db, []string{name}, admin.Options{Backlog: h.backlog.get})
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	g := st.Groups[0]
	d := groupData{G: g, LagAlert: h.cfg.LagAlert}
	for _, p := range g.Partitions {
		row := partitionRow{PartitionStatus: p, Lag: time.Duration(p.OldestDueMS) * time.Millisecond,
			Moving: p.Held && p.Desired != "" && p.Desired != p.Owner}
		switch {
		case p.Owner == "" || p.Released:
			row.Reasons = append(row.Reasons, "unowned")
		case !p.Held:
			row.Reasons = append(row.Reasons, "lease expired")
		}
		if row.Lag > h.cfg.LagAlert {
			row.Reasons = append(row.Reasons, "lagging")
		}
		if len(row.Reasons) > 0 {
			d.Alerts++
		}
		d.Partitions = append(d.Partitions, row)
	}
	for _, p := range g.Paused {
		d.Paused = d.Paused || p.Kind == ""
	}
	d.Events, err = h.q.Events(r.Context(), name, eventsShown)
	if err != nil {
		d.EventErr = h.explain(err).Error()
	}
	v := h.newView(w, r, "Group "+name, "groups")
	v.Now, v.Data = st.Now, d
	h.render(w, r, "group", v)
}
