package ui

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// pageSize is how many jobs a page of the jobs list shows.
const pageSize = 50

// states are the jobs list's state filters: the stored states and running.
var states = []string{string(queue.StatePending), string(queue.StateRunning), string(queue.StateCompleted),
	string(queue.StateDiscarded), string(queue.StateCancelled)}

// jobFilter is the jobs list's filter, as the form and the links carry it.
type jobFilter struct {
	Group, State, Kind, Key string
	Partition               *int
	Batch, Before           int64
}

// jobsData is the jobs list's.
type jobsData struct {
	Groups []string
	States []string
	F      jobFilter
	Page   queue.JobPage
	// Err says why the page could not be read.
	Err string
	// Short reports a page cut short by the scan bound: fewer than a page
	// of jobs found among the jobs read, older ones left to search.
	Short bool
}

// parseFilter reads the jobs list's filter from r; group defaults to the
// first of groups.
func parseFilter(r *http.Request, groups []string) (jobFilter, error) {
	q := r.URL.Query()
	f := jobFilter{Group: q.Get("group"), State: q.Get("state"), Kind: q.Get("kind"), Key: q.Get("key")}
	if f.Group == "" && len(groups) > 0 {
		f.Group = groups[0]
	}
	for _, c := range []struct {
		field, v string
		max      int
	}{{"group", f.Group, maxName}, {"kind", f.Kind, maxName}, {"key", f.Key, maxKey}} {
		if err := checkText(c.field, c.v, c.max); err != nil {
			return f, err
		}
	}
	if f.State != "" && !slices.Contains(states, f.State) {
		return f, badInput("state %q is not one of %s", f.State, strings.Join(states, ", "))
	}
	if s := strings.TrimSpace(q.Get("partition")); s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p < 0 {
			return f, badInput("partition %q is not a partition number (0 or more)", s)
		}
		f.Partition = &p
	}
	var err error
	if f.Batch, err = positive(q.Get("batch"), "batch"); err != nil {
		return f, err
	}
	if f.Before, err = positive(q.Get("before"), "before"); err != nil {
		return f, err
	}
	return f, nil
}

// positive parses an optional positive id parameter (0 when empty).
func positive(s, name string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, badInput("%s %q is not an id (a positive integer)", name, s)
	}
	return n, nil
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	groups, err := partition.Groups(ctx, h.db)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	f, err := parseFilter(r, groups)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	if f.Group != "" && !slices.Contains(groups, f.Group) {
		h.failErr(w, r, badNotFound("group %q does not exist", f.Group))
		return
	}
	now, err := admin.Now(ctx, h.db)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := jobsData{Groups: groups, States: states, F: f}
	code := http.StatusOK
	if f.Group != "" {
		qf := queue.Filter{Group: f.Group, State: queue.JobState(f.State), Kind: f.Kind, Key: f.Key, Batch: f.Batch,
			Before: f.Before, Limit: pageSize, Scan: h.cfg.Scan}
		if f.Partition != nil {
			qf.Partitions = []int{*f.Partition}
		}
		d.Page, err = h.search(ctx, qf)
		if err != nil {
			// The form stays usable: the page shows the error where the
			// jobs would be.
			err = h.explain(err)
			code = status(err)
			d.Err = h.report(r, "ui: request failed", code, err)
		}
		d.Short = err == nil && len(d.Page.Jobs) < pageSize && d.Page.Next != 0
		if err == nil && f.State != string(queue.StateRunning) && len(d.Page.Jobs) > 0 {
			h.markRunning(ctx, f.Group, d.Page.Jobs)
		}
	}
	v := h.newView(w, r, "Jobs", "jobs")
	v.Now, v.Data = now, d
	h.renderStatus(w, r, code, "jobs", v)
}

// searchSlice is how many jobs a jobs page reads at a time while it
// searches (see search).
const searchSlice = 1000

// search reads a page of jobs matching f, as queue.Client.Page does with
// f.Scan = Config.Scan, but in slices of searchSlice jobs, one after the
// other, and stops early once the slices took Config.ScanTime: a filter
// that matches rarely reads up to Config.Scan jobs on an idle database, and
// fewer on a busy one, where the page still answers in about ScanTime. The
// page says how many it searched, and offers the rest.
func (h *Handler) search(ctx context.Context, f queue.Filter) (queue.JobPage, error) {
	start := h.now()
	var pg queue.JobPage
	for {
		f.Scan = min(searchSlice, h.cfg.Scan-pg.Scanned)
		p, err := h.q.Page(ctx, f)
		if err != nil {
			return queue.JobPage{}, err
		}
		pg.Jobs = append(pg.Jobs, p.Jobs...)
		pg.Scanned += p.Scanned
		pg.Next = p.Next
		if len(p.Jobs) >= f.Limit || p.Next == 0 || p.Scanned == 0 || pg.Scanned >= h.cfg.Scan ||
			h.now().Sub(start) >= h.cfg.ScanTime {
			if pg.Jobs == nil {
				pg.Jobs = []queue.JobInfo{}
			}
			return pg, nil
		}
		f.Before, f.Limit = p.Next, f.Limit-len(p.Jobs)
	}
}

// markRunning sets Running on the pending jobs of js that run now, as
// their partitions' owners published them, so that the list says "running
// on W" as the job's page does rather than "pending". It reads the
// group's running set once per page: a small table (the jobs in flight).
// A failed read leaves the jobs as they are: the list is still right
// about the stored states.
func (h *Handler) markRunning(ctx context.Context, group string, js []queue.JobInfo) {
	rs, err := h.q.Running(ctx, group)
	if err != nil {
		h.log.WarnContext(ctx, "ui: read the running jobs", "group", group, "err", err)
		return
	}
	if len(rs) == 0 {
		return
	}
	by := make(map[int64]queue.RunningJob, len(rs))
	for _, r := range rs {
		by[r.ID] = r
	}
	for i := range js {
		if r, ok := by[js[i].ID]; ok && js[i].State == queue.StatePending && js[i].Running == nil {
			js[i].Running = &queue.RunningInfo{Worker: r.Worker, Since: r.Since, Token: r.Token}
		}
	}
}

// jobData is the job detail's.
type jobData struct {
	J queue.JobInfo
	// State is the job's state, "running" for a pending job its owner runs.
	State string
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.failErr(w, r, badInput("job id %q is not a positive integer", r.PathValue("id")))
		return
	}
	j, err := h.q.JobInfo(r.Context(), id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	now, err := admin.Now(r.Context(), h.db)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := jobData{J: j, State: string(j.State)}
	if j.State == queue.StatePending && j.Running != nil {
		d.State = string(queue.StateRunning)
	}
	v := h.newView(w, r, "Job "+strconv.FormatInt(id, 10), "jobs")
	v.Now, v.Data = now, d
	h.render(w, r, "job", v)
}
