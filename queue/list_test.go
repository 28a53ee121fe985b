package queue_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

func ids(jobs []queue.JobInfo) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// List selects by state, kind and partition, newest first, in pages.
func TestList(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	k1, k2 := keysIn(1, 3, "a"), keysIn(2, 2, "b")
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: k1[0], Args: email{To: "x"}},
		queue.Job{Group: "emails", Key: k1[1], Args: step{"s"}},
		queue.Job{Group: "emails", Key: k1[2], Args: email{To: "y"}},
		queue.Job{Group: "emails", Key: k2[0], Args: email{To: "z"}},
		queue.Job{Group: "emails", Key: k2[1], Args: step{"t"}})
	pgtest.Must(t, err)
	id := func(i ...int) []int64 {
		var out []int64
		for _, n := range i {
			out = append(out, res[n].ID)
		}
		return out
	}
	got, err := c.Cancel(ctx, id(2, 3)...)
	pgtest.Must(t, err)
	if len(got) != 2 {
		t.Fatalf("cancelled %v", got)
	}
	for _, tc := range []struct {
		f    queue.Filter
		want []int64
	}{
		{queue.Filter{Group: "emails"}, id(4, 3, 2, 1, 0)},
		{queue.Filter{Group: "emails", State: "pending"}, id(4, 1, 0)},
		{queue.Filter{Group: "emails", State: "cancelled"}, id(3, 2)},
		{queue.Filter{Group: "emails", State: "discarded"}, nil},
		{queue.Filter{Group: "emails", Kind: "step"}, id(4, 1)},
		{queue.Filter{Group: "emails", Partitions: []int{1}}, id(2, 1, 0)},
		{queue.Filter{Group: "emails", Partitions: []int{2, 5}, State: "pending"}, id(4)},
		{queue.Filter{Group: "emails", Limit: 2}, id(4, 3)},
		{queue.Filter{Group: "emails", Limit: 2, Before: res[3].ID}, id(2, 1)},
	} {
		jobs, err := c.List(ctx, tc.f)
		if err != nil {
			t.Errorf("List(%+v): %v", tc.f, err)
			continue
		}
		if !slices.Equal(ids(jobs), tc.want) {
			t.Errorf("List(%+v) = %v; want %v", tc.f, ids(jobs), tc.want)
		}
	}
	jobs, err := c.List(ctx, queue.Filter{Group: "emails", Kind: "email", State: "pending"})
	pgtest.Must(t, err)
	want, err := c.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	if len(jobs) != 1 || jobs[0].Key != k1[0] || string(jobs[0].Args) != string(want.Args) ||
		jobs[0].Partition != 1 || jobs[0].State != "pending" || !jobs[0].RunAt.Equal(want.RunAt) {
		t.Errorf("List gives %+v; JobInfo %+v", jobs, want)
	}
}

func TestListBadFilter(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	if _, err := c.List(ctx, queue.Filter{Group: "nope"}); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Errorf("unknown group: %v; want ErrUnknownGroup", err)
	}
	if jobs, err := c.List(ctx, queue.Filter{Group: "emails"}); err != nil || len(jobs) != 0 {
		t.Errorf("empty group: %v, %v; want no jobs, no error", jobs, err)
	}
	for _, f := range []queue.Filter{
		{},
		{Group: "emails", State: "runnin"}, // "running" is the pseudo-state StateRunning
		{Group: "emails", Limit: -1},
		{Group: "emails", Limit: queue.MaxListLimit + 1},
		{Group: "emails", Partitions: []int{-1}},
		{Group: "emails", Partitions: []int{7, 8}}, // the group has 8 partitions
		{Group: "emails", Before: -5},
	} {
		if _, err := c.List(ctx, f); !errors.Is(err, queue.ErrInvalidFilter) {
			t.Errorf("List(%+v) = %v; want ErrInvalidFilter", f, err)
		}
	}
}
