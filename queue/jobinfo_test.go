package queue_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// errorsText joins the texts of a job's recorded errors, for tests that
// look for one.
func errorsText(es []queue.AttemptError) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error
	}
	return strings.Join(s, "\n")
}

// JobInfo is typed: the state is a JobState, the recorded errors are
// AttemptErrors (not raw JSON bytes), the args JSON that marshals as
// itself; List filters on the state constants.
func TestJobInfoIsTyped(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	res, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "a", Args: email{To: "a@example.com"}},
		queue.Job{Group: "emails", Key: "b", Args: email{To: "b@example.com"}})
	pgtest.Must(t, err)
	// The first job failed twice, then was cancelled.
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET attempt = 2, errors = '[
		{"attempt": 1, "at": "2026-01-02T03:04:05.123456+00:00", "error": "smtp: 421"},
		{"attempt": 2, "at": "2026-01-02T03:05:05+00:00", "error": "smtp: 450\nmailbox busy"}]' WHERE id = $1`, res[0].ID)
	pgtest.Must(t, err)
	var before time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&before))
	_, err = c.Cancel(ctx, res[0].ID)
	pgtest.Must(t, err)

	info, err := c.JobInfo(ctx, res[0].ID)
	pgtest.Must(t, err)
	if info.State != queue.StateCancelled {
		t.Errorf("state %q; want %q", info.State, queue.StateCancelled)
	}
	want := []queue.AttemptError{
		{Attempt: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC), Error: "smtp: 421"},
		{Attempt: 2, At: time.Date(2026, 1, 2, 3, 5, 5, 0, time.UTC), Error: "smtp: 450\nmailbox busy"},
		{Attempt: 2, Error: "cancelled by an operator"},
	}
	if len(info.Errors) != len(want) {
		t.Fatalf("errors %+v; want %+v", info.Errors, want)
	}
	if last := info.Errors[2]; last.At.Before(before) {
		t.Errorf("the cancellation recorded at %v, before the cancel (%v)", last.At, before)
	}
	want[2].At = info.Errors[2].At
	for i, e := range info.Errors {
		if e.Attempt != want[i].Attempt || !e.At.Equal(want[i].At) || e.Error != want[i].Error {
			t.Errorf("error %d: %+v; want %+v", i, e, want[i])
		}
	}
	var args email
	if err := json.Unmarshal(info.Args, &args); err != nil || args.To != "a@example.com" {
		t.Errorf("args %s: %+v, %v", info.Args, args, err)
	}
	b, err := json.Marshal(info)
	pgtest.Must(t, err)
	if !strings.Contains(string(b), `"Args":{"to":"a@example.com"`) || !strings.Contains(string(b), `"error":"smtp: 421"`) {
		t.Errorf("JobInfo as JSON: %s", b)
	}
	// Printed with fmt, the arguments read as their JSON text, not as a list of bytes.
	if p := fmt.Sprintf("%+v", info); !strings.Contains(p, `Args:{"to": "a@example.com"`) {
		t.Errorf("JobInfo printed with %%+v: %s", p)
	}

	// A job without errors has an empty list, not nil.
	other, err := c.JobInfo(ctx, res[1].ID)
	pgtest.Must(t, err)
	if other.State != queue.StatePending || other.Errors == nil || len(other.Errors) != 0 {
		t.Errorf("pending job: state %q, errors %#v; want pending, none", other.State, other.Errors)
	}
	for _, st := range queue.JobStates {
		jobs, err := c.List(ctx, queue.Filter{Group: "emails", State: st})
		pgtest.Must(t, err)
		var ids []int64
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		want := map[queue.JobState][]int64{queue.StatePending: {res[1].ID}, queue.StateCancelled: {res[0].ID}}[st]
		if !slices.Equal(ids, want) {
			t.Errorf("List state %s: %v; want %v", st, ids, want)
		}
	}
}
