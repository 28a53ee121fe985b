package queue

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// JobPage is one page of the jobs Page selects, newest first.
type JobPage struct {
	// Jobs are the matching jobs found, at most Filter.Limit. Never nil.
	Jobs []JobInfo
	// Next is the Filter.Before that continues the listing below this
	// page; 0 when no older job is left to search. A page may hold fewer
	// than Limit jobs (none, even) and still have a Next: Page stops after
	// searching Filter.Scan jobs so that it answers quickly however many
	// jobs are kept. The jobs from Next down are not searched yet.
	Next int64
	// Scanned is how many jobs Page read to fill the page: up to its last
	// job when it filled, else every job it read (at most Filter.Scan).
	Scanned int
}

// DefaultScan is the default Filter.Scan: how many jobs Page reads at most
// to fill one page.
const DefaultScan = 10_000

// Page returns one page of the jobs f selects, newest first, reading at
// most f.Scan jobs, so that its cost is bounded by f.Scan, never by the
// jobs kept: pages continue with f.Before = Next (keyset paging: no
// OFFSET). What it reads depends on the filter:
//
//   - State discarded or cancelled: the group's failed jobs, through an
//     index of their own (jobs_failed), at most f.Scan: with no other
//     filter every job read matches, and pages are full.
//   - Key with State pending: the key's pending jobs, through the index
//     the owners use (jobs_key), at most f.Scan: every job read matches
//     (but for Kind and Batch), and pages are full.
//   - State running: the jobs published as running (see List), Limit at
//     a time.
//   - Anything else: the jobs whose ids are among the f.Scan ids below the
//     newest job under f.Before (any group's, in id order), filtered: at
//     most f.Scan jobs, fewer where ids were deleted (retention). A filter
//     matching few recent jobs returns a short (or empty) page with a Next
//     f.Scan ids lower: the search goes on from there. There is no index on
//     kind, or on key for every state: each would cost every enqueue and
//     every completion (see docs/ui.md).
//
// Its errors are List's (and ErrInvalidFilter for a Scan out of 0 to
// MaxListLimit*10).
func (c *Client) Page(ctx context.Context, f Filter) (JobPage, error) {
	a, err := c.listArgs(ctx, f, true)
	if err != nil {
		return JobPage{}, err
	}
	if f.State == StateRunning {
		return c.runningPage(ctx, f, a)
	}
	stmt, args := c.in.PageWalk, []any{a.group, a.state, a.kind, a.parts, a.before, a.limit, a.batch, a.scan, a.key}
	switch {
	case f.State == StateDiscarded || f.State == StateCancelled:
		stmt = c.in.PageFailed
	case f.Key != "" && f.State == StatePending:
		// A key's jobs are all in its partition: another partition selected
		// alone has none.
		p := partition.OfString(f.Key, a.partCount)
		if a.parts != nil && !slices.Contains(a.parts, int32(p)) {
			return JobPage{Jobs: []JobInfo{}}, nil
		}
		stmt, args = c.in.PageKey, append(args, int32(p))
	}
	rows, err := c.pool.Query(ctx, stmt, args...)
	if err != nil {
		return JobPage{}, store.ClassifyRead("queue", "page", f.Group, err)
	}
	pg := JobPage{Jobs: []JobInfo{}}
	var scanned int
	var last *int64
	defer rows.Close()
	for rows.Next() {
		if rows.RawValues()[2] == nil { // no job: only the walk's columns
			dst := make([]any, len(rows.FieldDescriptions()))
			dst[0], dst[1] = &scanned, &last
			err = rows.Scan(dst...)
		} else {
			var j JobInfo
			j, err = scanJob(prefixed{rows, []any{&scanned, &last}})
			pg.Jobs = append(pg.Jobs, j)
		}
		if err != nil {
			break
		}
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return JobPage{}, store.ClassifyRead("queue", "page", f.Group, err)
	}
	pg.Scanned = scanned
	if last != nil {
		pg.Next = *last
	}
	if len(pg.Jobs) == 0 && a.partCount == 0 {
		// Nothing found: is it the group? (A Partitions or Key filter
		// checked it already.)
		if err := c.groupExists(ctx, f.Group, "page"); err != nil {
			return JobPage{}, err
		}
	}
	return pg, nil
}

// runningPage is Page for StateRunning: the running list is short (the
// jobs running now), read whole through the running table, Limit at a
// time.
func (c *Client) runningPage(ctx context.Context, f Filter, a listArgs) (JobPage, error) {
	rows, err := c.pool.Query(ctx, c.run.List, a.group, a.state, a.kind, a.parts, a.before, a.limit+1, a.batch, a.key)
	if err != nil {
		return JobPage{}, store.ClassifyRead("queue", "page", f.Group, err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (JobInfo, error) { return scanJob(r) })
	if err != nil {
		return JobPage{}, store.ClassifyRead("queue", "page", f.Group, err)
	}
	pg := JobPage{Jobs: jobs, Scanned: len(jobs)}
	if len(jobs) > a.limit {
		pg.Jobs = jobs[:a.limit]
		pg.Next = pg.Jobs[a.limit-1].ID
		pg.Scanned = a.limit
	}
	if len(jobs) == 0 && a.partCount == 0 {
		if err := c.groupExists(ctx, f.Group, "page"); err != nil {
			return JobPage{}, err
		}
	}
	return pg, nil
}

// prefixed is a row whose first columns are scanned into pre, the rest
// into Scan's destinations.
type prefixed struct {
	r   pgx.Row
	pre []any
}

// Scan scans the row into pre and then dst.
func (p prefixed) Scan(dst ...any) error { return p.r.Scan(append(p.pre, dst...)...) }
