package partition

import (
	"context"
	"testing"
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
