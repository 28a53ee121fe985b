package queue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/partition"
)

// Partition events, recorded for operators (see docs/ui.md): a handoff by
// the statement that opens a grant's run (queueOpenRun), fenced refusals by
// the Processor's recorder (see record.go).

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
	// ID orders events: a later event has a higher id.
	ID int64
	// At is when the event was recorded, on the database clock.
	At time.Time
	// Group and Partition are the partition the event happened to.
	Group     string
	Partition int
	// Kind is what happened.
	Kind EventKind
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
// (1 to 1000; 0 means 100; another value gives an error wrapping
// ErrInvalidFilter). An unknown group gives an error wrapping
// ErrUnknownGroup. It reads the group's newest events by index: its cost
// is the limit's.
func (c *Client) Events(ctx context.Context, group string, limit int) ([]Event, error) {
	if limit < 0 || limit > 1000 {
		return nil, fmt.Errorf("%w: limit %d is not in 0..1000", ErrInvalidFilter, limit)
	}
	if limit == 0 {
		limit = 100
	}
	rows, err := c.pool.Query(ctx, c.in.Events, group, limit)
	if err != nil {
		return nil, store.ClassifyRead("queue", "events", group, err)
	}
	defer rows.Close()
	evs := []Event{}
	found := false
	for rows.Next() {
		var id, tok, prev, job *int64
		var part *int
		var kind, owner *string
		var at *time.Time
		var abrupt *bool
		if err := rows.Scan(&id, &at, &part, &kind, &owner, &tok, &prev, &abrupt, &job); err != nil {
			return nil, store.ClassifyRead("queue", "events", group, err)
		}
		found = true
		if id == nil { // the group's row
			continue
		}
		e := Event{ID: *id, At: *at, Group: group, Partition: *part, Kind: EventKind(*kind), Owner: *owner,
			Token: fence.Token(*tok), Abrupt: *abrupt}
		if prev != nil {
			e.Previous = fence.Token(*prev)
		}
		if job != nil {
			e.Job = *job
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return nil, store.ClassifyRead("queue", "events", group, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, group)
	}
	// One statement's two parts: order its rows here rather than rely on
	// the order of UNION ALL.
	slices.SortFunc(evs, func(a, b Event) int { return cmp.Compare(b.ID, a.ID) })
	return evs, nil
}

// ownerOf is the member id of o's owner, as events and outcome counts
// name it ("" without a lease: a test's ownership).
func ownerOf(o partition.Ownership) string {
	if o.Lease == nil {
		return ""
	}
	return partition.MemberOf(o.Lease.Owner())
}
