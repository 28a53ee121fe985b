package queue

import (
	"fmt"
	"testing"
	"time"
)

// Enqueues to different partitions of one group within the window are
// coalesced: only the first notifies in its statement, the rest are left
// to the window's one flush, however many partitions they spread over
// (keyless jobs are placed round robin). Control: enqueues to different
// groups each notify in their statement, and so does an enqueue after the
// window.
func TestNotifierCoalescesByGroup(t *testing.T) {
	n := newNotifier(nil, "ch", time.Hour)
	in := 0
	for part := range 64 {
		if n.inStatement([]wakeKey{{"g", part}}) {
			in++
		}
	}
	if in != 1 {
		t.Fatalf("%d of 64 enqueues to partitions of one group notified in their statements; want 1", in)
	}
	in = 0
	for i := range 8 {
		if n.inStatement([]wakeKey{{fmt.Sprint("other-", i), 0}}) {
			in++
		}
	}
	if in != 8 {
		t.Fatalf("control: %d of 8 enqueues to 8 groups notified in their statements; want 8", in)
	}
	short := newNotifier(nil, "ch", time.Nanosecond)
	short.inStatement([]wakeKey{{"g", 0}})
	time.Sleep(time.Millisecond)
	if !short.inStatement([]wakeKey{{"g", 1}}) {
		t.Fatal("control: an enqueue after the window did not notify in its statement")
	}
}
