package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// GroupResult is what CreateGroup did, as `leasehold groups create --json`
// prints it.
type GroupResult struct {
	Group      string `json:"group"`
	Partitions int    `json:"partitions"`
	// Created is false when the group existed already, with the same
	// count.
	Created bool `json:"created"`
}

// CreateGroup creates group with partitions partitions unless it exists
// (queue.Client.EnsureGroup). An existing group with another count is a
// *partition.CountError; a bad name or count wraps ErrBadInput.
func CreateGroup(ctx context.Context, db *leasehold.DB, group string, partitions int) (GroupResult, error) {
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return GroupResult{}, err
	}
	created, err := q.EnsureGroup(ctx, group, partitions)
	if errors.Is(err, queue.ErrInvalidGroup) {
		return GroupResult{}, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	if err != nil {
		return GroupResult{}, err
	}
	return GroupResult{Group: group, Partitions: partitions, Created: created}, nil
}

// GroupInfo is a group, as `leasehold groups list --json` prints it.
type GroupInfo struct {
	Group      string `json:"group"`
	Partitions int    `json:"partitions"`
	// Held counts the partitions whose lease is unexpired.
	Held int `json:"held"`
	// LiveMembers counts the members whose heartbeat is unexpired.
	LiveMembers int `json:"live_members"`
	// Pending counts the group's pending jobs (due, scheduled and
	// retrying).
	Pending int64 `json:"pending"`
}

// ListGroups lists the groups, in name order.
func ListGroups(ctx context.Context, db *leasehold.DB) ([]GroupInfo, error) {
	names, err := partition.Groups(ctx, db)
	if err != nil {
		return nil, err
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, err
	}
	out := []GroupInfo{}
	for _, g := range names {
		st, err := partition.Inspect(ctx, db, g)
		if errors.Is(err, partition.ErrGroupNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, err
		}
		stats, err := q.Stats(ctx, g)
		if err != nil && !errors.Is(err, queue.ErrUnknownGroup) {
			return nil, err
		}
		gi := GroupInfo{Group: g, Partitions: len(st.Partitions)}
		for _, p := range st.Partitions {
			if p.Held {
				gi.Held++
			}
		}
		for _, m := range st.Members {
			if m.Live {
				gi.LiveMembers++
			}
		}
		for _, s := range stats {
			gi.Pending += s.Pending + s.Scheduled
		}
		out = append(out, gi)
	}
	return out, nil
}
