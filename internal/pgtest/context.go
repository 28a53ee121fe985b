package pgtest

import (
	"context"
	"testing"
	"time"
)

// ContextTimeout is how long a test's Context lasts.
const ContextTimeout = 2 * time.Minute

// Context returns a context for a test's database work: cancelled when the
// test ends, and after ContextTimeout at the latest, so that a test stuck
// on the database fails instead of hanging the package.
func Context(t testing.TB) context.Context {
	return ContextFor(t, ContextTimeout)
}

// ContextFor is Context lasting at most d.
func ContextFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
