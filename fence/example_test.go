package fence_test

import (
	"fmt"

	"github.com/leasehold/leasehold/fence"
)

func ExampleToken() {
	held := fence.Token(33) // a paused holder's token
	seen := fence.Token(34) // the highest token the resource has accepted
	fmt.Println(held.Valid(), held < seen)
	// Output: true true
}
