package fence_test

import (
	"errors"
	"testing"

	"github.com/leasehold/leasehold/fence"
)

// The message names the check that refused when there is one to name, and
// leaves it out for a write with one check only.
func TestFencedErrorMessageNamesTheCheck(t *testing.T) {
	for _, c := range []struct {
		e    fence.FencedError
		want string
	}{
		{fence.FencedError{Resource: "partition/g/1", Held: 4, Current: 7, Reason: "the lease was granted anew", Check: fence.CheckEarly},
			"fence: partition/g/1 refused token 4 (current 7) at the early read: the lease was granted anew"},
		{fence.FencedError{Resource: "partition/g/1", Held: 4, Current: 4, Reason: "the lease expired", Check: fence.CheckLocking},
			"fence: partition/g/1 refused token 4 (current 4) at the locking check: the lease expired"},
		{fence.FencedError{Resource: "accounts[1]", Held: 4, Current: 9, Reason: "a higher token wrote the row"},
			"fence: accounts[1] refused token 4 (current 9): a higher token wrote the row"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q; want %q", got, c.want)
		}
		if !errors.Is(&c.e, fence.ErrFenced) {
			t.Errorf("%q does not wrap ErrFenced", c.e.Error())
		}
	}
}
