// Package fence holds fencing tokens and the writes that check them.
//
// A lease hands out a strictly increasing Token with each grant. A resource
// that remembers the highest token it has seen can refuse a write carrying a
// lower one; that, not the lease alone, is what makes a holder that paused
// past its lease harmless. The package is the vocabulary at the bottom of
// leasehold: it imports none of its other packages. It offers one way per
// kind of resource:
//
//   - Table: the conditional write on the target, for any PostgreSQL table
//     whose rows record the highest token that wrote them;
//   - Header, CheckResponse, HighWater: carrying a token over HTTP and
//     refusing stale ones on the server;
//   - Unfenced: the explicit, logged escape hatch for resources that cannot
//     check a token. It is not safe, and says so.
//
// Effects in the same database as the leases use the fenced transaction of
// package lease (lease.Fence), which checks the lease row itself.
//
// A refused write returns an error wrapping ErrFenced (a *FencedError). A
// write whose outcome is unknown (the connection died during COMMIT)
// returns an *IndeterminateError, the one such error of every leasehold
// package. Querier is the one database interface leasehold's APIs take.
//
// See docs/fencing.md.
package fence
