package admin

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// Job ids are positive integers.
func TestJobIDsArePositiveIntegers(t *testing.T) {
	ids, err := ParseIDs([]string{"1", "42"})
	if err != nil || len(ids) != 2 || ids[0] != 1 || ids[1] != 42 {
		t.Fatalf("ids %v, %v", ids, err)
	}
	for _, bad := range []string{"0", "-3", "12x", ""} {
		if _, err := ParseIDs([]string{"1", bad}); err == nil || !strings.Contains(err.Error(), "not a positive integer") {
			t.Errorf("id %q: %v", bad, err)
		}
	}
}

// The errors of ShowJobs, RetryJobs and CancelJobs say what was not done
// and match their sentinels.
func TestMissingAndNotChangedErrors(t *testing.T) {
	var err error = &MissingError{IDs: []int64{3, 999}}
	if !errors.Is(err, queue.ErrNotFound) || err.Error() != "queue: job not found: 3, 999 (never enqueued, or deleted by retention)" {
		t.Errorf("missing: %v", err)
	}
	err = &NotChangedError{Left: 2, Total: 3, Verb: "cancelled"}
	if !errors.Is(err, ErrNotChanged) || err.Error() != "some jobs were left alone: 2 of 3 not cancelled" {
		t.Errorf("not changed: %v", err)
	}
}
