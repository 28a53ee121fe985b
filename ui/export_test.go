package ui

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
)

// CountBacklogReads makes h count its reads of a group's backlog in n.
func CountBacklogReads(h *Handler, n *atomic.Int64) {
	read := h.backlog.read
	h.backlog.read = func(ctx context.Context, group string, waits bool) (admin.Backlog, error) {
		n.Add(1)
		return read(ctx, group, waits)
	}
}

// SetClock makes h read the local time from now.
func SetClock(h *Handler, now func() time.Time) { h.now = now }
