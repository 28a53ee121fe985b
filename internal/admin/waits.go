package admin

import (
	"time"

	"github.com/leasehold/leasehold/queue"
)

// WaitsLimit is how many waiting keys ReadStatus reports per group, the
// most held up first.
const WaitsLimit = 5

// WaitStatus is a key whose due jobs wait behind a job that is not due
// (a strict job scheduled for later, retrying or snoozed), as `leasehold
// status --json` prints it.
type WaitStatus struct {
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
func waitsOf(ws []queue.Wait, now time.Time) []WaitStatus {
	out := make([]WaitStatus, len(ws))
	for i, w := range ws {
		out[i] = WaitStatus{Partition: w.Partition, Key: w.Key, JobID: w.JobID, RunAt: w.RunAt,
			DueInMS: w.RunAt.Sub(now).Milliseconds(), Attempt: w.Attempt, Waiting: w.Waiting}
	}
	return out
}
