// Package lease provides named leases in PostgreSQL with fencing tokens.
//
// A [Client] acquires a lease by name for a TTL counted by the database
// clock. Each grant carries a [fence.Token] larger than every token granted
// before for that name, across releases, expiries and deletion of old rows.
// The Client renews all its leases in one statement per renew interval and
// keeps a local deadline per lease, counted from when the acquire or renew
// request was sent and ending a safety margin before the TTL: once it
// passes without a confirmed renewal, the lease is lost, closing [Lease.Done]
// even if the database cannot be reached.
//
// A lease alone does not make a resource safe: a holder can pause (GC, VM
// migration, network stall) past its lease and resume believing it still
// holds it. Carry [Lease.Token] in every write and have the resource refuse
// tokens lower than the highest it has seen.
//
// See docs/leases.md for the model, the guarantees and how to choose the TTL.
package lease
