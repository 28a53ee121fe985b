package partition

import "github.com/leasehold/leasehold/internal/migrations"

type queries struct {
	createGroup, groupCount, heartbeat, leave, view, status, members string
}

// Creating a group records its partition count once; later members read it.
const sqlCreateGroup = `
INSERT INTO {{schema}}.groups (name, partitions) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`

const sqlGroupCount = `SELECT partitions FROM {{schema}}.groups WHERE name = $1`

// Join or heartbeat: extend this incarnation's membership, or take over a
// row whose previous incarnation expired. No row back: another live process
// uses the id. joined_at = heartbeat_at in the result means a (re)join.
const sqlHeartbeat = `
INSERT INTO {{schema}}.members AS m (group_name, id, incarnation, joined_at, heartbeat_at, expires_at)
VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp(), clock_timestamp() + $4 * interval '1 microsecond')
ON CONFLICT (group_name, id) DO UPDATE
SET joined_at    = CASE WHEN m.incarnation = EXCLUDED.incarnation AND m.expires_at > clock_timestamp()
                        THEN m.joined_at ELSE EXCLUDED.heartbeat_at END,
    incarnation  = EXCLUDED.incarnation,
    heartbeat_at = EXCLUDED.heartbeat_at,
    expires_at   = EXCLUDED.expires_at
WHERE m.incarnation = EXCLUDED.incarnation OR m.expires_at <= clock_timestamp()
RETURNING m.joined_at = m.heartbeat_at`

const sqlLeave = `
DELETE FROM {{schema}}.members WHERE group_name = $1 AND id = $2 AND incarnation = $3`

// The live view: the group's partition count and its unexpired members.
const sqlView = `
SELECT g.partitions,
       coalesce(array_agg(m.id ORDER BY m.id) FILTER (WHERE m.id IS NOT NULL), '{}')
FROM {{schema}}.groups AS g
LEFT JOIN {{schema}}.members AS m ON m.group_name = g.name AND m.expires_at > clock_timestamp()
WHERE g.name = $1
GROUP BY g.partitions`

// One row per partition of the group, with its lease if it has one.
const sqlStatus = `
SELECT p, l.owner, l.token, l.acquired_at, l.expires_at, coalesce(l.expires_at > clock_timestamp(), false)
FROM {{schema}}.groups AS g
CROSS JOIN LATERAL generate_series(0, g.partitions - 1) AS p
LEFT JOIN {{schema}}.leases AS l ON l.name = 'partition/' || g.name || '/' || p
WHERE g.name = $1
ORDER BY p`

const sqlMembers = `
SELECT id, joined_at, heartbeat_at, expires_at, expires_at > clock_timestamp()
FROM {{schema}}.members WHERE group_name = $1 ORDER BY id`

func render(schema string) (queries, string, error) {
	q, err := migrations.Schema(schema)
	if err != nil {
		return queries{}, "", err
	}
	r := func(s string) string { return migrations.Render(s, q) }
	if schema == "" {
		schema = migrations.DefaultSchema
	}
	return queries{
		createGroup: r(sqlCreateGroup),
		groupCount:  r(sqlGroupCount),
		heartbeat:   r(sqlHeartbeat),
		leave:       r(sqlLeave),
		view:        r(sqlView),
		status:      r(sqlStatus),
		members:     r(sqlMembers),
	}, schema + ".partitions", nil
}
