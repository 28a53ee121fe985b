package ui

import (
	"fmt"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

// throughputMinutes is how many minutes of throughput the overview shows.
const throughputMinutes = 15

// overviewData is the overview's: every group, with its throughput, and
// every member.
type overviewData struct {
	Groups  []groupSummary
	Members []memberRow
	// BacklogAt is the oldest count of the groups' backlogs; BacklogAge is
	// Config.BacklogAge.
	BacklogAt  time.Time
	BacklogAge time.Duration
}

// groupSummary is a group's row of the overview, and its throughput.
type groupSummary struct {
	admin.GroupStatus
	Paused bool // the whole group is paused
	// Throughput is the last minutes of outcomes, oldest first; Err says
	// why it could not be read, as a page may show it (see report).
	Throughput []queue.Throughput
	Err        string
	// Completed and Failed total Throughput; Top is the largest minute's
	// Completed+Failed (the chart's scale).
	Completed, Failed, Top int64
}

// chartHeight is the height of a minute's bar chart, and barWidth its
// width. Each minute's chart sits in the minute's own cell of the
// throughput table, under its column's heading, so that bars and counts
// line up at any width.
const (
	chartHeight = 40
	barWidth    = 12
)

// minuteBar is a minute's bar: the failed runs at the bottom, the
// completed ones stacked above, scaled to the busiest minute shown.
type minuteBar struct {
	OkY, OkH, BadY, BadH int64
	Title                string
}

// Runs reports whether s recorded any run in its minutes: without any,
// the page says so in a line instead of a chart of zeros.
func (s groupSummary) Runs() bool { return s.Completed+s.Failed > 0 }

// Bars returns s's bars, a minute each in the order of Throughput, scaled
// to its busiest minute.
func (s groupSummary) Bars() []minuteBar {
	bars := make([]minuteBar, len(s.Throughput))
	for i, t := range s.Throughput {
		bad := bar(t.Failed(), s.Top)
		ok := bar(t.Completed, s.Top)
		bars[i] = minuteBar{BadY: chartHeight - bad, BadH: bad, OkY: chartHeight - bad - ok, OkH: ok,
			Title: fmt.Sprintf("%s: %d completed, %d failed", utc(t.Minute), t.Completed, t.Failed())}
	}
	return bars
}

// memberRow is a member of a group.
type memberRow struct {
	Group string
	admin.MemberStatus
	Heartbeat time.Duration // its heartbeat's age on the database clock
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	st, err := admin.ReadStatusWith(r.Context(), h.db, nil, admin.Options{NoWaits: true, NoOutbox: true, NoLimits: true, Backlog: h.backlog.get})
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := overviewData{BacklogAge: h.cfg.BacklogAge}
	for _, g := range st.Groups {
		if d.BacklogAt.IsZero() || g.BacklogAt.Before(d.BacklogAt) {
			d.BacklogAt = g.BacklogAt
		}
		s := groupSummary{GroupStatus: g}
		for _, p := range g.Paused {
			s.Paused = s.Paused || p.Kind == ""
		}
		tp, err := h.q.Throughput(r.Context(), g.Group, throughputMinutes)
		if err != nil { // the page is still worth showing
			err = h.explain(err)
			s.Err = h.report(r, "ui: throughput could not be read", status(err), err)
		}
		s.Throughput = tp
		for _, t := range tp {
			s.Completed += t.Completed
			s.Failed += t.Failed()
			s.Top = max(s.Top, t.Completed+t.Failed())
		}
		d.Groups = append(d.Groups, s)
		for _, m := range g.Members {
			d.Members = append(d.Members, memberRow{Group: g.Group, MemberStatus: m,
				Heartbeat: time.Duration(m.HeartbeatAgeMS) * time.Millisecond})
		}
	}
	v := h.newView(w, r, "Overview", "overview")
	v.Now, v.Data = st.Now, d
	h.render(w, r, "overview", v)
}
