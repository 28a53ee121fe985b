package queue

import (
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/internal/queuesql"
)

// queries holds every statement of the package, rendered for one schema.
// The statements, with the reasoning behind each, are in internal/queuesql.
type queries struct {
	groups, enqueue, enqueuePlain, fetch, openRun, closeRun, completeFenced, retain, inspect, retry, stats, cancel, list, waits string
}

func render(schema string) (queries, error) {
	q, err := store.Quote(schema)
	if err != nil {
		return queries{}, err
	}
	r := func(s string) string { return store.Render(s, q) }
	return queries{
		groups:         r(queuesql.Groups),
		enqueue:        r(queuesql.Enqueue),
		enqueuePlain:   r(queuesql.EnqueuePlain),
		fetch:          r(queuesql.Fetch),
		openRun:        r(queuesql.OpenRun),
		closeRun:       r(queuesql.CloseRun),
		completeFenced: r(queuesql.CompleteFenced),
		retain:         r(queuesql.Retain),
		inspect:        r(queuesql.Inspect),
		retry:          r(queuesql.Retry),
		stats:          r(queuesql.Stats),
		cancel:         r(queuesql.Cancel),
		list:           r(queuesql.List),
		waits:          r(queuesql.Waits),
	}, nil
}
