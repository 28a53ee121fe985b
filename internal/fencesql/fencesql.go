package fencesql

// Check locks a lease row FOR SHARE inside the effect transaction and
// returns its token and whether it is unexpired; $1 is the lease name, $2 to
// $4 the lock, idle-in-transaction and statement timeouts.
//
// Check sets the transaction's timeouts and reads the lease row in one
// statement (one round trip). The row lock is taken by the LockRows step on
// top of the plan, after the settings subquery has run, so lock_timeout
// already bounds the wait for it.
const Check = `
SELECT l.token, l.expires_at > clock_timestamp()
FROM (SELECT set_config('lock_timeout', $2, true),
             set_config('idle_in_transaction_session_timeout', $3, true),
             set_config('statement_timeout', $4, true)) AS settings,
     {{schema}}.leases AS l
WHERE l.name = $1
FOR SHARE OF l`
