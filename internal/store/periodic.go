package store

// PeriodicSQL are the statements of package periodic.
type PeriodicSQL struct {
	Declare, Last, Insert, SetJobs, SetNext, Prune, List string
}

// periodicDeclare records the schedules a new leader declares: $1 group,
// $2 names, $3 specs, $4 missed policies, $5 since (the leader's clock) for
// the schedules not recorded yet. An existing schedule keeps its since. It
// returns each schedule's name and since.
const periodicDeclare = `
INSERT INTO {{schema}}.periodic_schedules AS p (group_name, name, spec, policy, since)
SELECT $1, u.name, u.spec, u.policy, $5
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(name, spec, policy)
ORDER BY u.name
ON CONFLICT (group_name, name) DO UPDATE
SET spec = EXCLUDED.spec, policy = EXCLUDED.policy, declared_at = clock_timestamp()
RETURNING p.name, p.since`

// periodicLast returns the latest recorded slot of each schedule in $2
// (NULL for none) of group $1: one backward primary-key scan each.
const periodicLast = `
SELECT u.name, (SELECT max(s.slot) FROM {{schema}}.periodic_slots AS s
                WHERE s.group_name = $1 AND s.schedule = u.name)
FROM unnest($2::text[]) AS u(name)`

// periodicInsert records slots for token $5 and returns those that no
// earlier transaction recorded: the primary key makes a second record of a
// slot a no-op, whatever the fence did. $1 group, $2 schedules, $3 slots,
// $4 missed counts, $6 skipped (not to be enqueued).
const periodicInsert = `
INSERT INTO {{schema}}.periodic_slots (group_name, schedule, slot, token, missed, skipped)
SELECT $1, u.schedule, u.slot, $5, u.missed, u.skipped
FROM unnest($2::text[], $3::timestamptz[], $4::integer[], $6::boolean[]) AS u(schedule, slot, missed, skipped)
ON CONFLICT (group_name, schedule, slot) DO NOTHING
RETURNING schedule, slot`

// periodicSetJobs records the job enqueued for each slot: $1 group,
// $2 schedules, $3 slots, $4 job ids.
const periodicSetJobs = `
UPDATE {{schema}}.periodic_slots AS p SET job_id = u.id
FROM unnest($2::text[], $3::timestamptz[], $4::bigint[]) AS u(schedule, slot, id)
WHERE p.group_name = $1 AND p.schedule = u.schedule AND p.slot = u.slot`

// periodicSetNext records each schedule's next slot and adds the missed
// counts of the slots just recorded to its total, for the CLI: $1 group,
// $2 names, $3 next slots, $4 missed counts to add.
const periodicSetNext = `
UPDATE {{schema}}.periodic_schedules AS p SET next_slot = u.next, missed_total = p.missed_total + u.missed
FROM unnest($2::text[], $3::timestamptz[], $4::bigint[]) AS u(name, next, missed)
WHERE p.group_name = $1 AND p.name = u.name AND (p.next_slot IS DISTINCT FROM u.next OR u.missed > 0)`

// periodicPrune deletes the slot rows of group $1 older than $2, except
// each schedule's latest, where the next leader resumes: at most $3 rows of
// each schedule the group declared, oldest first. Its cost is bounded by
// what it deletes, whatever the rows retained: per schedule, one backward
// primary-key probe for the latest slot and one forward primary-key range
// scan, stopped at $3 rows.
const periodicPrune = `
DELETE FROM {{schema}}.periodic_slots AS d
USING (
    SELECT x.group_name, x.schedule, x.slot
    FROM {{schema}}.periodic_schedules AS s
    CROSS JOIN LATERAL (
        SELECT x.group_name, x.schedule, x.slot FROM {{schema}}.periodic_slots AS x
        WHERE x.group_name = $1 AND x.schedule = s.name
          AND x.slot < least($2, (SELECT l.slot FROM {{schema}}.periodic_slots AS l
                                  WHERE l.group_name = $1 AND l.schedule = s.name
                                  ORDER BY l.slot DESC LIMIT 1))
        ORDER BY x.slot LIMIT $3) AS x
    WHERE s.group_name = $1
) AS o
WHERE d.group_name = o.group_name AND d.schedule = o.schedule AND d.slot = o.slot`

// periodicList returns the schedules of group $1 (all groups when NULL)
// with their latest $3 slots, newest first (one backward primary-key scan
// each, stopped at $3 rows), and the group's leader lease ($2 is the lease
// name prefix, "periodic/"): group, name, spec, missed policy, since, next
// slot, declared at, the slots, their job ids (0 for none), tokens, missed
// counts, whether each was skipped and when each was recorded (NULL arrays
// for no slot), total missed, leader owner, token, live, and the
// database's time.
const periodicList = `
SELECT p.group_name, p.name, p.spec, p.policy, p.since, p.next_slot, p.declared_at,
       s.slots, s.job_ids, s.tokens, s.missed, s.skipped, s.recorded,
       p.missed_total,
       l.owner, l.token, coalesce(l.expires_at > clock_timestamp(), false), clock_timestamp()
FROM {{schema}}.periodic_schedules AS p
LEFT JOIN LATERAL (
    SELECT array_agg(x.slot ORDER BY x.slot DESC) AS slots,
           array_agg(coalesce(x.job_id, 0) ORDER BY x.slot DESC) AS job_ids,
           array_agg(x.token ORDER BY x.slot DESC) AS tokens,
           array_agg(x.missed ORDER BY x.slot DESC) AS missed,
           array_agg(x.skipped ORDER BY x.slot DESC) AS skipped,
           array_agg(x.enqueued_at ORDER BY x.slot DESC) AS recorded
    FROM (SELECT y.slot, y.job_id, y.token, y.missed, y.skipped, y.enqueued_at FROM {{schema}}.periodic_slots AS y
          WHERE y.group_name = p.group_name AND y.schedule = p.name
          ORDER BY y.slot DESC LIMIT $3) AS x) AS s ON true
LEFT JOIN {{schema}}.leases AS l ON l.name = $2 || p.group_name
WHERE $1::text IS NULL OR p.group_name = $1
ORDER BY p.group_name, p.name`
