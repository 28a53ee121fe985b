// Package history records every version of every lease row as the database
// wrote it (through an audit trigger installed for tests) and checks the
// recorded history for the lease invariants: per name, fencing tokens
// strictly increase from grant to grant, and no two grants' validity
// windows overlap. Concurrency and failure tests use it; its own tests
// include negative controls.
package history
