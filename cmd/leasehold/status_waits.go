package main

import (
	"fmt"
	"io"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// waitsLimit is how many waiting keys `leasehold status` shows per group,
// the most held up first.
const waitsLimit = 5

// waitStatus is a key whose due jobs wait behind a job that is not due
// (a strict job scheduled for later, retrying or snoozed), as `leasehold
// status --json` prints it.
type waitStatus struct {
	Partition int    `json:"partition"`
	Key       string `json:"key"`
	// JobID is the job the key's due jobs wait behind.
	JobID int64 `json:"job_id"`
	// RunAt is when that job is due.
	RunAt time.Time `json:"run_at"`
	// DueInMS is the time until that job is due, from the report's now.
	DueInMS int64 `json:"due_in_ms"`
	// Attempt is how many attempts that job has spent: more than 0 when it
	// is retrying after a failure.
	Attempt int `json:"attempt"`
	// Waiting counts the key's due jobs waiting behind that job.
	Waiting int64 `json:"waiting"`
}

// waitsOf converts the queue's waits, with their due times relative to now.
func waitsOf(ws []queue.Wait, now time.Time) []waitStatus {
	out := make([]waitStatus, len(ws))
	for i, w := range ws {
		out[i] = waitStatus{Partition: w.Partition, Key: w.Key, JobID: w.JobID, RunAt: w.RunAt,
			DueInMS: w.RunAt.Sub(now).Milliseconds(), Attempt: w.Attempt, Waiting: w.Waiting}
	}
	return out
}

// printWaits writes the section of a group's waiting keys, if it has any,
// followed by a blank line.
func printWaits(w io.Writer, waits []waitStatus) error {
	if len(waits) == 0 {
		return nil
	}
	fmt.Fprintln(w, "keys waiting behind a job:")
	t := newTable(w, "PARTITION", "KEY", "JOB", "DUE IN", "ATTEMPTS", "WAITING")
	for _, ws := range waits {
		why := "scheduled"
		if ws.Attempt > 0 {
			why = "retrying"
		}
		t.row(ws.Partition, fmt.Sprintf("%q", ws.Key), ws.JobID, human(time.Duration(ws.DueInMS)*time.Millisecond),
			fmt.Sprintf("%d (%s)", ws.Attempt, why), ws.Waiting)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(waits) == waitsLimit {
		fmt.Fprintf(w, "(the %d most held up keys; others may wait too)\n", waitsLimit)
	}
	fmt.Fprintln(w)
	return nil
}
