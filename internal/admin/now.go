package admin

import (
	"context"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
)

// Now returns the database clock, that reports show ages against (the
// web UI's pages that read no Status, for one). A closed pool gives an
// error wrapping leasehold.ErrClosed.
func Now(ctx context.Context, db *leasehold.DB) (time.Time, error) {
	now, err := dbNow(ctx, db)
	if err != nil {
		return time.Time{}, store.ClassifyRead("admin", "clock", "", err)
	}
	return now, nil
}
