package queue

import (
	"context"
	"errors"
	"time"

	"github.com/leasehold/leasehold/fence"
)

// This file: what a Processor records for operators (throughput per minute,
// handoffs and fenced refusals) and paged job listing, read by the web UI
// (package ui) and the CLI. See docs/ui.md.

// errTODO marks the skeleton's unimplemented readers (issue 16 in progress).
var errTODO = errors.New("queue: not implemented yet")

// JobPage is one page of the jobs Page selects, newest first.
type JobPage struct {
	// Jobs are the matching jobs found, at most Filter.Limit.
	Jobs []JobInfo
	// Next is the Filter.Before that continues the listing below this
	// page; 0 when no older job matches. A page may hold fewer than Limit
	// jobs and still have a Next: Page stops after reading Filter.Scan jobs
	// so that it answers quickly however many jobs are kept.
	Next int64
	// Scanned is how many jobs Page read to fill the page.
	Scanned int
}

// DefaultScan is the default Filter.Scan: how many jobs Page reads at most
// to fill one page.
const DefaultScan = 10_000

// Page returns one page of the jobs f selects, newest first, reading at
// most f.Scan jobs. Filters that an index serves (State discarded or
// cancelled; Key with State pending) read only matching jobs; the others
// walk the jobs from f.Before down, newest first, and stop after f.Scan,
// returning the matches found and the Next to continue from. Its errors are
// List's.
func (c *Client) Page(ctx context.Context, f Filter) (JobPage, error) {
	return JobPage{}, errTODO
}

// Throughput counts one minute of a group's job outcomes, as its
// Processors recorded them. Counts are approximate: a Processor records
// them every ProcessorConfig.PublishInterval, and the counts of a
// Processor that crashed since are lost.
type Throughput struct {
	// Minute is the minute's start, on the database clock.
	Minute time.Time
	// The outcomes of the runs that ended in the minute (see Outcome).
	Completed, Retried, Discarded, Cancelled, Snoozed, Fenced int64
}

// Failed returns the runs that failed: retried or discarded.
func (t Throughput) Failed() int64 { return t.Retried + t.Discarded }

// Throughput returns the last minutes of group's outcomes, oldest first,
// one per minute up to and including the current one (minutes without runs
// are zero). An unknown group gives an error wrapping ErrUnknownGroup.
func (c *Client) Throughput(ctx context.Context, group string, minutes int) ([]Throughput, error) {
	return nil, errTODO
}

// EventKind is the kind of an Event.
type EventKind string

// The kinds of Event.
const (
	// EventHandoff: a grant of a partition's lease started running its
	// queue.
	EventHandoff EventKind = "handoff"
	// EventFenced: a run's outcome was refused by the fence, a newer grant
	// having taken the partition.
	EventFenced EventKind = "fenced"
)

// Event is something that happened to a partition, recorded for operators.
// Events are kept for a day (see docs/ui.md).
type Event struct {
	ID        int64
	At        time.Time // the database clock
	Group     string
	Partition int
	Kind      EventKind
	// Owner is the member that started running the partition (handoff),
	// or whose outcome was refused (fenced).
	Owner string
	// Token is the new grant's fencing token (handoff), or the refused
	// one (fenced).
	Token fence.Token
	// Previous is the grant that ran the partition before (handoff; 0 when
	// none did).
	Previous fence.Token
	// Abrupt reports a handoff whose previous run ended without closing:
	// a crash, a kill, a pause past the lease, a lost database.
	Abrupt bool
	// Job is the job whose outcome was refused (fenced).
	Job int64
}

// Events returns group's most recent events, newest first, at most limit
// (1 to 1000; 0 means 100). An unknown group gives an error wrapping
// ErrUnknownGroup.
func (c *Client) Events(ctx context.Context, group string, limit int) ([]Event, error) {
	return nil, errTODO
}
