package partition

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fakeclock"
)

// A Run that returned once its context ended did not give up early, even
// when its AfterFunc had not started yet (stop reports true). Control: a
// Run that returned while its context was live did.
func TestReturnedEarlyOnlyBeforeTheContextEnded(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := func() bool { return true } // the AfterFunc had not started
	if returnedEarly(ended, stopped) {
		t.Fatal("a Run that returned after its context ended counts as early")
	}
	live, cancelLive := context.WithCancel(context.Background())
	defer cancelLive()
	if !returnedEarly(live, stopped) {
		t.Fatal("control: a Run that returned with its context live does not count as early")
	}
}

// The notifications of the member's group that come within notifyGather
// of the first (a join, then the releases it causes, from each member)
// wake the reconcile loop once, when the gather ends. Control: the same
// notifications a gather apart wake it once each.
func TestNotificationsWithinAGatherWakeOnce(t *testing.T) {
	clk := fakeclock.New(time.Now())
	m := &Member{clock: clk, wake: make(chan struct{}, 8)}
	// woken reports whether the loop was woken within a second (the
	// clock runs due timers on goroutines of their own).
	woken := func(within time.Duration) bool {
		select {
		case <-m.wake:
			return true
		case <-time.After(within):
			return false
		}
	}
	for range 8 {
		m.gatherPoke()
		clk.Advance(notifyGather / 10)
	}
	if woken(50 * time.Millisecond) {
		t.Fatal("woken before the gather ended")
	}
	clk.Advance(notifyGather)
	if !woken(time.Second) {
		t.Fatal("8 notifications within a gather never woke the loop")
	}
	if woken(50 * time.Millisecond) {
		t.Fatal("8 notifications within a gather woke the loop twice")
	}
	for i := range 3 {
		m.gatherPoke()
		clk.Advance(notifyGather)
		if !woken(time.Second) {
			t.Fatalf("control: notification %d, a gather after the one before, did not wake the loop", i+1)
		}
	}
}
