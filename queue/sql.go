package queue

import "github.com/leasehold/leasehold/internal/migrations"

type queries struct {
	groups, enqueue string
}

const sqlGroups = `SELECT name, partitions FROM {{schema}}.groups WHERE name = ANY($1::text[])`

// Many jobs in one statement. A job whose unique key is already pending in
// its group (or earlier in the same batch) is skipped; RETURNING gives the
// inserted rows in input order, with their ordinality, so the caller can
// tell which inputs were duplicates.
const sqlEnqueue = `
INSERT INTO {{schema}}.jobs (group_name, partition, key, kind, args, max_attempts, run_at, unique_key)
SELECT g, p, k, kind, a, m, coalesce(r, clock_timestamp()), u
FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::jsonb[], $6::int[], $7::timestamptz[], $8::text[])
     WITH ORDINALITY AS t(g, p, k, kind, a, m, r, u, n)
ORDER BY n
ON CONFLICT (group_name, unique_key) WHERE unique_key IS NOT NULL AND state = 'pending' DO NOTHING
RETURNING id, group_name, key, unique_key`

func render(schema string) (queries, error) {
	q, err := migrations.Schema(schema)
	if err != nil {
		return queries{}, err
	}
	r := func(s string) string { return migrations.Render(s, q) }
	return queries{groups: r(sqlGroups), enqueue: r(sqlEnqueue)}, nil
}
