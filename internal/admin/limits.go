package admin

import (
	"context"
	"encoding/json"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
	"github.com/leasehold/leasehold/queue"
)

// LimitsShown is how many keys held back by limits the status report
// lists per group: those with the most jobs waiting.
const LimitsShown = 20

// LimitsStatus is what a group's limits hold back now and the limits its
// kinds declare, as `leasehold status --json` prints it: the keys whose
// due jobs wait behind a limit, as each partition's owner published them
// with its running jobs (at most a publish interval late, and the
// pipeline's snapshot at most a poll interval old; see docs/control.md).
type LimitsStatus struct {
	// Keys are the keys with the most jobs waiting, busiest first, at most
	// the number asked for (LimitsShown in the report).
	Keys []LimitedKeyStatus `json:"keys"`
	// Totals are the jobs held back per limit, every limit listed (in
	// queue.Limits order), zeros included.
	Totals []LimitTotal `json:"totals"`
	// Partial reports that the totals are lower bounds: some partition's
	// owner published only its busiest queue.LimitedKeysPerPartition keys.
	Partial bool `json:"partial"`
	// Declared are the limits the kinds' handlers declare, as the workers
	// recorded them with the kinds they handle, in kind order: only the
	// kinds that limit more than one job of a key at a time.
	Declared []KindLimits `json:"declared"`
}

// LimitedKeyStatus is a key whose jobs wait behind a limit.
type LimitedKeyStatus struct {
	Key string `json:"key"`
	// Kind is the kind of the key's next job.
	Kind string `json:"kind"`
	// Limit is key_concurrency, key_rate or group_concurrency.
	Limit queue.Limit `json:"limit"`
	// Waiting is how many of its due jobs are held back.
	Waiting int64 `json:"waiting"`
	// Partition is the key's partition; Owner the worker (member id) of
	// the grant that holds its jobs back, Token the grant's token.
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Token     int64  `json:"token"`
}

// LimitTotal is how many jobs, of how many keys, a limit holds back.
type LimitTotal struct {
	Limit   queue.Limit `json:"limit"`
	Waiting int64       `json:"waiting"`
	Keys    int64       `json:"keys"`
}

// KindLimits are the limits a kind declares.
type KindLimits struct {
	Kind string `json:"kind"`
	queue.DeclaredLimits
}

// Total is how many jobs the limits hold back, over all limits.
func (l *LimitsStatus) Total() int64 {
	var n int64
	for _, t := range l.Totals {
		n += t.Waiting
	}
	return n
}

// ReadLimits reads the keys held back by limits in group, the n busiest,
// and the limits its kinds declare: one statement whatever the number of
// partitions and of jobs held back (it reads the group's running rows,
// where the owners publish them, and its kinds). An unknown group has
// none.
func ReadLimits(ctx context.Context, db *leasehold.DB, group string, n int) (*LimitsStatus, error) {
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	var keys, totals, declared []byte
	out := &LimitsStatus{Keys: []LimitedKeyStatus{}, Declared: []KindLimits{}}
	err = db.Pool().QueryRow(ctx, st.Running.Limited, group, n, queue.LimitedKeysPerPartition).
		Scan(&keys, &totals, &out.Partial, &declared)
	if err != nil {
		return nil, store.ClassifyRead("admin", "limits", group, err)
	}
	var ts []LimitTotal
	var ds []struct {
		Kind   string               `json:"kind"`
		Limits queue.DeclaredLimits `json:"limits"`
	}
	if err := json.Unmarshal(keys, &out.Keys); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(totals, &ts); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(declared, &ds); err != nil {
		return nil, err
	}
	for _, l := range queue.Limits {
		t := LimitTotal{Limit: l}
		for _, x := range ts {
			if x.Limit == l {
				t = x
			}
		}
		out.Totals = append(out.Totals, t)
	}
	for _, d := range ds {
		if d.Limits.Limits() {
			out.Declared = append(out.Declared, KindLimits{Kind: d.Kind, DeclaredLimits: d.Limits})
		}
	}
	return out, nil
}
