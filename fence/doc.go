// Package fence holds fencing tokens and the writes that check them.
//
// A lease hands out a strictly increasing Token with each grant. A resource
// that remembers the highest token it has seen can refuse a write carrying a
// lower one; that, not the lease alone, is what makes a holder that paused
// past its lease harmless. The package offers one way per kind of resource:
//
//   - Postgres: effects in the same database as the leases commit only while
//     the lease still carries the token (the check locks the lease row, so a
//     concurrent takeover waits for the effect transaction);
//   - Table: the conditional write on the target, for any PostgreSQL table
//     whose rows record the highest token that wrote them;
//   - Header, CheckResponse, HighWater: carrying a token over HTTP and
//     refusing stale ones on the server;
//   - Unfenced: the explicit, logged escape hatch for resources that cannot
//     check a token. It is not safe, and says so.
//
// A refused write returns an error wrapping ErrFenced (a *FencedError).
// See docs/fencing.md.
package fence
