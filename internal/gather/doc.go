// Package gather sends work that arrives while a send runs together in
// the next send: the first item after a quiet spell goes at once, the
// items that come meanwhile share one statement. A member's release of the
// partitions it hands off (package partition) and the records of the runs
// its grants open and close (package queue) use it.
package gather
