package ui

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// batchesShown is how many batches a page of the batch list shows.
const batchesShown = 50

// batchRow is a batch with its rate and ETA.
type batchRow struct {
	admin.BatchView
	// ETA is the estimated time left; -1 when it cannot be estimated.
	ETA time.Duration
	// Cancellable reports a batch that CancelBatch would change.
	Cancellable bool
}

// batchesData is the batch list's.
type batchesData struct {
	Groups  []string
	Group   string
	Batches []batchRow
	// Next is the Before of the next page; 0 when this one is the last.
	Next int64
}

// row returns b's row, with its rate measured over the reads of its pages.
func (h *Handler) row(b queue.BatchInfo) batchRow {
	rate := h.meter(b)
	v := admin.ViewOf(b, rate)
	st := b.State()
	return batchRow{BatchView: v, ETA: b.ETA(rate), Cancellable: st == queue.BatchOpen || st == queue.BatchRunning}
}

func (h *Handler) batches(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	groups, err := partition.Groups(ctx, h.db)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	group := r.URL.Query().Get("group")
	if group != "" && !slices.Contains(groups, group) {
		h.failErr(w, r, badNotFound("group %q does not exist", group))
		return
	}
	before, err := positive(r.URL.Query().Get("before"), "before")
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	bs, err := h.q.Batches(ctx, queue.BatchFilter{Group: group, Before: before, Limit: batchesShown})
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := batchesData{Groups: groups, Group: group}
	for _, b := range bs {
		d.Batches = append(d.Batches, h.row(b))
	}
	if len(bs) == batchesShown {
		d.Next = bs[len(bs)-1].ID
	}
	v := h.newView(w, r, "Batches", "batches")
	if len(bs) > 0 {
		v.Now = bs[0].ReadAt
	} else if v.Now, err = admin.Now(ctx, h.db); err != nil {
		h.failErr(w, r, err)
		return
	}
	v.Data = d
	h.render(w, r, "batches", v)
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.failErr(w, r, badInput("batch id %q is not a positive integer", r.PathValue("id")))
		return
	}
	b, err := h.q.BatchByID(r.Context(), id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	v := h.newView(w, r, "Batch "+b.Name, "batches")
	v.Now, v.Data = b.ReadAt, h.row(b)
	h.render(w, r, "batch", v)
}
