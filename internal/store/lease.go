package store

// leaseAcquireCommon ends both acquire statements. They take a row that is free
// (expired or released) or already held by the same owner, in one atomic
// statement. A new token is drawn with nextval after the row lock is taken,
// so it is larger than the row's previous token; on the insert path the token
// drawn before the insert is larger than any token of a deleted row because
// leaseDeleteExpired runs after leaseLockTable, which locks the table against
// concurrent acquires. No row back means the lease is held.
const leaseAcquireCommon = `
ON CONFLICT (name) DO UPDATE
SET owner       = EXCLUDED.owner,
    token       = nextval('{{schema}}.lease_token_seq'),
    acquired_at = clock_timestamp(),
    renewed_at  = clock_timestamp(),
    expires_at  = clock_timestamp() + $3 * interval '1 microsecond'
WHERE l.expires_at <= clock_timestamp() OR l.owner = EXCLUDED.owner
RETURNING l.name, l.token, l.acquired_at, l.expires_at`

// leaseAcquire takes one lease: $1 name, $2 owner, $3 TTL in microseconds.
const leaseAcquire = `
INSERT INTO {{schema}}.leases AS l (name, owner, token, acquired_at, renewed_at, expires_at)
VALUES ($1, $2, nextval('{{schema}}.lease_token_seq'),
        clock_timestamp(), clock_timestamp(), clock_timestamp() + $3 * interval '1 microsecond')` +
	leaseAcquireCommon

// leaseAcquireMany takes several names in one statement, locking rows in name
// order (the canonical order) so that concurrent multi-acquires cannot
// deadlock. For all-or-nothing it runs inside a transaction that is rolled
// back unless every name came back; otherwise whichever names came back are
// granted.
//
// A name whose row the statement's snapshot shows held by another owner,
// unexpired, is not attempted: ON CONFLICT DO UPDATE would lock the row to
// find it held, and a fleet's members asking again and again for
// partitions still held by the members handing them off (64 members
// starting together) then queued for those rows with the release that
// frees them. A row released after the snapshot is skipped this time, and
// taken at the next attempt (the release notifies). Which rows are taken
// is still decided under their locks, by leaseAcquireCommon.
const leaseAcquireMany = `
INSERT INTO {{schema}}.leases AS l (name, owner, token, acquired_at, renewed_at, expires_at)
SELECT n, $2, nextval('{{schema}}.lease_token_seq'),
       clock_timestamp(), clock_timestamp(), clock_timestamp() + $3 * interval '1 microsecond'
FROM unnest($1::text[]) AS n
WHERE NOT EXISTS (
    SELECT FROM {{schema}}.leases AS h
    WHERE h.name = n AND h.owner <> $2 AND h.expires_at > clock_timestamp())
ORDER BY n` + leaseAcquireCommon

// leaseRenew renews every lease of one owner whose token is unchanged and that has
// not expired, in one statement, locking rows in name order and waiting for
// each row's lock. It returns the names renewed. Lease.Renew runs it for one
// lease; the renewal loop runs leaseRenewSkipLocked instead, because with
// several leases a wait for one row (locked by another transaction: a fence
// check of a version before migration 15 held it FOR SHARE) would hold the
// locks of the rows before it and stall their fence checks.
const leaseRenew = `
UPDATE {{schema}}.leases AS l
SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $4 * interval '1 microsecond'
FROM (` + leaseMine + `) AS mine
WHERE l.name = mine.name
RETURNING l.name, l.expires_at`

// leaseMine is the rows of the grants ($1[i], $2[i]) of owner $3 that
// have not expired, locked FOR NO KEY UPDATE in name order: the rows
// leaseRenew renews and leaseReleaseMany releases.
const leaseMine = `
    SELECT m.name
    FROM {{schema}}.leases AS m
    JOIN unnest($1::text[], $2::bigint[]) AS h(name, token) ON m.name = h.name AND m.token = h.token
    WHERE m.owner = $3 AND m.expires_at > clock_timestamp()
    ORDER BY m.name
    FOR NO KEY UPDATE OF m
`

// leaseRenewSkipLocked is the renewal loop's statement: it renews what
// leaseRenew renews, but skips ("busy") the rows it cannot lock at once,
// so it never waits for a row lock and never holds one row's lock while
// waiting for another's. $1 names, $2 tokens, $3 owner, $4 TTL in
// microseconds. It returns one row per name renewed (renewed = true) and
// one per name skipped (renewed = false): still this grant, unexpired, in
// the statement's snapshot, but its row locked by another transaction in a
// mode that conflicts with FOR NO KEY UPDATE (not a fence check, FOR KEY
// SHARE, since migration 15: a takeover, an older version's FOR SHARE
// fence, a lock of yours). A name it does
// not return is lost: expired, released or granted anew. All parts of the
// statement share one snapshot, so the busy test sees the rows as they were
// before the update; a row that a takeover committed after the snapshot is
// reported busy, and the next attempt finds it lost.
const leaseRenewSkipLocked = `
WITH held AS (
    SELECT h.name, h.token FROM unnest($1::text[], $2::bigint[]) AS h(name, token)
), renewed AS (
    UPDATE {{schema}}.leases AS l
    SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + $4 * interval '1 microsecond'
    FROM (
        SELECT m.name
        FROM {{schema}}.leases AS m
        JOIN held AS h ON m.name = h.name AND m.token = h.token
        WHERE m.owner = $3 AND m.expires_at > clock_timestamp()
        FOR NO KEY UPDATE OF m SKIP LOCKED
    ) AS mine
    WHERE l.name = mine.name
    RETURNING l.name
)
SELECT h.name, r.name IS NOT NULL AS renewed
FROM held AS h
LEFT JOIN renewed AS r ON r.name = h.name
WHERE r.name IS NOT NULL OR EXISTS (
    SELECT 1 FROM {{schema}}.leases AS s
    WHERE s.name = h.name AND s.token = h.token AND s.owner = $3 AND s.expires_at > clock_timestamp())`

// leaseRelease frees one grant; it checks owner and token: releasing twice, or a
// lease that expired or was taken over, changes nothing. It sets expires_at
// and renewed_at to one timestamp (two clock_timestamp() calls differ): the
// mark of a released lease (partitionStatus).
const leaseRelease = `
UPDATE {{schema}}.leases
SET expires_at = c.t, renewed_at = c.t
FROM (SELECT clock_timestamp() AS t) AS c
WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > c.t`

// leaseReleaseMany is leaseRelease for the grants ($1[i], $2[i]) of owner
// $3, in one statement: the leases a member hands off together. It locks
// the rows in name order (leaseMine), as every statement locking several
// lease rows does, so that it cannot deadlock with them. Both columns take
// one reading of the clock, so that expires_at = renewed_at marks the row
// released (partitionStatus): two readings differed by a microsecond on
// some rows.
const leaseReleaseMany = `
WITH c AS MATERIALIZED (SELECT clock_timestamp() AS t)
UPDATE {{schema}}.leases AS l
SET expires_at = c.t, renewed_at = c.t
FROM (` + leaseMine + `) AS mine, c
WHERE l.name = mine.name`

// leaseReleaseOrphans frees grants to this owner that no *Lease holds: the ones an
// acquire with an unknown outcome may have committed. Only called while the
// Client holds none of names and keeps them reserved.
const leaseReleaseOrphans = `
UPDATE {{schema}}.leases
SET expires_at = c.t, renewed_at = c.t
FROM (SELECT clock_timestamp() AS t) AS c
WHERE name = ANY($1::text[]) AND owner = $2 AND expires_at > c.t`

// leaseInspect reads one lease row and the database time: $1 name.
const leaseInspect = `
SELECT owner, token, acquired_at, renewed_at, expires_at, clock_timestamp()
FROM {{schema}}.leases WHERE name = $1`

// leaseInspectMany reads the rows of the names in $1.
const leaseInspectMany = `
SELECT name, owner, token, acquired_at, renewed_at, expires_at, clock_timestamp()
FROM {{schema}}.leases WHERE name = ANY($1::text[])`

// leaseLockTable takes SHARE ROW EXCLUSIVE, which conflicts with the ROW EXCLUSIVE
// lock every acquire holds from before it draws its token until it commits,
// so no acquire can straddle a deletion with a token drawn before it.
const leaseLockTable = `LOCK TABLE {{schema}}.leases IN SHARE ROW EXCLUSIVE MODE`

// leaseDeleteExpired deletes rows that expired more than $1 microseconds ago; run
// it after leaseLockTable in the same transaction.
const leaseDeleteExpired = `
DELETE FROM {{schema}}.leases WHERE expires_at < clock_timestamp() - $1 * interval '1 microsecond'`

// leasePeek reads a lease row's token and whether it is unexpired, without
// locking it, and whether the transaction is READ COMMITTED: Fence.Tx's
// early refusal, before it runs the effects. (Above READ COMMITTED, the
// transaction's snapshot is taken by this read, and a locking check after
// the effects would fail on any renewal committed meanwhile: Fence.Tx then
// locks first.) $1 is the lease name.
const leasePeek = `
SELECT token, expires_at > clock_timestamp(), current_setting('transaction_isolation') = 'read committed'
FROM {{schema}}.leases WHERE name = $1`

// leaseCheck locks a lease row FOR KEY SHARE inside the effect transaction
// and returns its token and whether it is unexpired; $1 is the lease name,
// $2 to $4 the lock, idle-in-transaction and statement timeouts.
//
// FOR KEY SHARE is a fence because migration 15 made the token part of a
// key (leases_name_token): every change of a token (a takeover, a
// re-grant) and every delete then takes FOR UPDATE and waits for the
// check's transaction, while a renewal or a release, which change no key
// column, do not. On a schema without that index the lock would fence
// nothing, so the statement names the index (fenceKey): before migration
// 15 it fails with undefined_table (ErrNotMigrated), closed, not open.
//
// leaseCheck sets the transaction's timeouts and reads the lease row in one
// statement (one round trip). The row lock is taken by the LockRows step on
// top of the plan, after the settings subquery has run, so lock_timeout
// already bounds the wait for it.
const leaseCheck = `
SELECT l.token, l.expires_at > clock_timestamp()
FROM (SELECT set_config('lock_timeout', $2, true),
             set_config('idle_in_transaction_session_timeout', $3, true),
             set_config('statement_timeout', $4, true), ` + fenceKey + `) AS settings,
     {{schema}}.leases AS l
WHERE l.name = $1
FOR KEY SHARE OF l`

// fenceKey names the index that makes FOR KEY SHARE a fence (see
// leaseCheck), in every statement that fences with it: a constant
// resolved when the statement is prepared, so it costs nothing at each
// execution, and fails the statement on a schema that lacks the index.
const fenceKey = `'{{schema}}.leases_name_token'::regclass AS fence_key`
