package ui

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strconv"
	"strings"
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
	// Rows are Partitions as the table's rows (rowsHTML).
	Rows template.HTML
	// Alerts counts the partitions marked as alerts.
	Alerts   int
	LagAlert time.Duration
	Events   []queue.Event
	EventErr string
	// Paused reports whether the whole group is paused.
	Paused bool
	// Outbox is what waits in the group's outbox, nil when the group
	// never used one; OutboxErr says why it could not be read.
	Outbox    *admin.OutboxStatus
	OutboxErr string
	// OutboxCounted is admin.OutboxCounted, for the legend.
	OutboxCounted int
	// Limits are the keys held back by limits and the limits the kinds
	// declare; LimitsErr says why they could not be read.
	Limits    *admin.LimitsStatus
	LimitsErr string
	// LimitedPerPartition is queue.LimitedKeysPerPartition, for the
	// legend.
	LimitedPerPartition int
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

// rowsHTML renders the ownership map's rows. They are written in Go, each
// value escaped with html.EscapeString (in text, and in double-quoted
// attributes), because html/template's reflection made a map of hundreds
// of partitions cost tens of milliseconds: the rest of the page stays a
// template. TestMapRowsAreEscaped checks the escaping.
func rowsHTML(rows []partitionRow, now time.Time, jobs func(p int) string) template.HTML {
	var b strings.Builder
	b.Grow(len(rows) * 600)
	esc := html.EscapeString
	for _, r := range rows {
		p := strconv.Itoa(r.Partition)
		class, status := "", ""
		switch {
		case len(r.Reasons) > 0:
			class, status = ` class="alert"`, strings.Join(r.Reasons, ", ")
		case r.Moving:
			class, status = ` class="moving"`, "moving"
		}
		owner, desired, token, lag := "–", "–", "–", "–"
		if r.Owner != "" {
			owner = r.Owner
		}
		switch {
		case r.Desired == r.Owner && r.Owner != "":
			desired = "same"
		case r.Desired == r.Owner:
		case r.Desired != "":
			desired = r.Desired
		default:
			desired = "none live"
		}
		if r.Token != 0 {
			token = strconv.FormatInt(r.Token, 10)
		}
		expires, title := "never granted", ""
		if r.ExpiresAt != nil {
			title = utc(*r.ExpiresAt)
			switch {
			case r.Held:
				expires = ago(*r.ExpiresAt, now)
			case r.Released:
				expires = "released"
			default:
				expires = "expired " + ago(*r.ExpiresAt, now)
			}
		}
		if r.Lag > 0 {
			lag = duration(r.Lag)
		}
		later := ""
		if r.Scheduled != 0 {
			later = ` <span class="later">+` + strconv.FormatInt(r.Scheduled, 10) + ` later</span>`
		}
		fmt.Fprintf(&b, `<tr id="p-%s" data-partition="%s"%s>
<td class="num"><a href="%s">%s</a></td>
<td class="owner">%s</td>
<td class="desired">%s</td>
<td class="num token">%s</td>
<td class="expires" title="%s">%s</td>
<td class="num running">%d</td>
<td class="num backlog" title="%d due, %d scheduled, %d retrying">%d%s</td>
<td class="num lag">%s</td>
<td class="status">%s</td>
</tr>
`, p, p, class, esc(jobs(r.Partition)), p, esc(owner), esc(desired), token, esc(title), esc(expires),
			r.Running, r.Pending, r.Scheduled, r.Retrying, r.Pending, later, esc(lag), esc(status))
	}
	return template.HTML(b.String()) // every value above is escaped, or a number
}

func (h *Handler) group(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	if err := checkText("group", name, maxName); err != nil {
		h.failErr(w, r, err)
		return
	}
	st, err := admin.ReadStatusWith(r.Context(), h.db, []string{name}, admin.Options{Backlog: h.backlog.get, NoOutbox: true, NoLimits: true})
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	g := st.Groups[0]
	d := groupData{G: g, LagAlert: h.cfg.LagAlert, OutboxCounted: admin.OutboxCounted,
		LimitedPerPartition: queue.LimitedKeysPerPartition}
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
	d.Rows = rowsHTML(d.Partitions, st.Now, func(p int) string {
		return h.cfg.Path + "/jobs" + query("group", name, "partition", p)
	})
	for _, p := range g.Paused {
		d.Paused = d.Paused || p.Kind == ""
	}
	// The outbox is read apart: the page is still worth showing without.
	d.Outbox, err = admin.ReadOutbox(r.Context(), h.db, g)
	if err != nil {
		err = h.explain(err)
		d.OutboxErr = h.report(r, "ui: outbox could not be read", status(err), err)
	}
	// So are the limits (one statement: the group's running rows).
	d.Limits, err = admin.ReadLimits(r.Context(), h.db, name, admin.LimitsShown)
	if err != nil {
		err = h.explain(err)
		d.LimitsErr = h.report(r, "ui: limits could not be read", status(err), err)
	}
	d.Events, err = h.q.Events(r.Context(), name, eventsShown)
	if err != nil {
		err = h.explain(err)
		d.EventErr = h.report(r, "ui: events could not be read", status(err), err)
	}
	v := h.newView(w, r, "Group "+name, "groups")
	v.Now, v.Data = st.Now, d
	h.render(w, r, "group", v)
}
