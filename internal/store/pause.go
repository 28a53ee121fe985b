package store

// Pauses: see migration 0010. Pause and resume notify the group's owners on
// the queue channel with the payload "pause:<group>" (a payload without a
// partition number, which listeners older than pauses ignore); owners also
// poll pauseKinds, so a lost notification delays a pause by at most one
// poll.

// pausePause pauses group $1 (kind $2, ” for the whole group), recording
// who ($3) and why ($4), and notifies channel $5. Pausing what is paused
// already changes nothing (the first pause's time and reason are kept).
// It returns whether the group exists; a missing group changes nothing.
const pausePause = `
WITH g AS (SELECT name FROM {{schema}}.groups WHERE name = $1),
ins AS (
    INSERT INTO {{schema}}.pauses (group_name, kind, paused_by, reason)
    SELECT name, $2, $3, $4 FROM g
    ON CONFLICT (group_name, kind) DO NOTHING
    RETURNING 1),
woken AS (SELECT pg_notify($5, 'pause:' || name) FROM g)
SELECT EXISTS (SELECT FROM g), (SELECT count(*) FROM ins) FROM (SELECT count(*) FROM woken) AS x`

// pauseResume resumes group $1 (kind $2, ” for the group itself: the
// kinds paused on their own stay paused) and notifies channel $3. It
// returns whether the group exists.
const pauseResume = `
WITH g AS (SELECT name FROM {{schema}}.groups WHERE name = $1),
del AS (
    DELETE FROM {{schema}}.pauses WHERE group_name = $1 AND kind = $2
    RETURNING 1),
woken AS (SELECT pg_notify($3, 'pause:' || name) FROM g)
SELECT EXISTS (SELECT FROM g), (SELECT count(*) FROM del) FROM (SELECT count(*) FROM woken) AS x`

// pauseList lists the pauses of group $1 (NULL: of every group), by
// group and kind, with the database's time.
const pauseList = `
SELECT group_name, kind, paused_at, paused_by, reason
FROM {{schema}}.pauses
WHERE $1::text IS NULL OR group_name = $1
ORDER BY group_name, kind`

// pauseKinds is the owners' poll: the paused kinds (” for the whole
// group) of the groups $1, one primary-key probe per group.
const pauseKinds = `
SELECT group_name, kind FROM {{schema}}.pauses WHERE group_name = ANY($1::text[])`

// PauseSQL are the statements of pauses (package queue).
type PauseSQL struct {
	Pause, Resume, List, Kinds string
}
