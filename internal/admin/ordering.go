package admin

import (
	"fmt"

	"github.com/leasehold/leasehold/queue"
)

// orderingNames are the orderings the command accepts, by name (the names
// queue.Ordering.String gives).
var orderingNames = map[string]queue.Ordering{
	queue.OrderStrict.String():      queue.OrderStrict,
	queue.OrderNonBlocking.String(): queue.OrderNonBlocking,
}

// ParseOrdering parses an ordering given by --ordering or an input line's
// "ordering": "strict" or "non-blocking"; "" is the default, strict. field
// names where it was given, for the error.
func ParseOrdering(field, name string) (queue.Ordering, error) {
	if name == "" {
		return queue.OrderStrict, nil
	}
	o, ok := orderingNames[name]
	if !ok {
		return 0, fmt.Errorf("%s %q is not %s or %s", field, name, queue.OrderStrict, queue.OrderNonBlocking)
	}
	return o, nil
}
