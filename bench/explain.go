package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/store"
)

func init() {
	register(suite{
		name:    "explain",
		summary: "EXPLAIN (ANALYZE, BUFFERS) of the queue's fetch, before and after issue 12, on unanalysed and analysed tables",
		run:     runExplain,
	})
}

// explainCase is one partition's backlog and the fetch the owner sends.
type explainCase struct {
	name      string
	partition int
	fill      string // INSERT of the partition's jobs ($1: partition)
	inFlight  int    // the first ids of the partition, held by the owner
	skip      []string
}

var explainCases = []explainCase{
	{name: "hot key: 20,000 due jobs of one key, 200 in flight", partition: 0, inFlight: 200,
		fill: `SELECT 'g', $1, 'hot', 'noop', '{}', 25, true, now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, 20000) AS i`},
	{name: "many keys: 560 due jobs of 560 keys", partition: 1,
		fill: `SELECT 'g', $1, 'k' || i, 'noop', '{}', 25, true, now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, 560) AS i`},
	{name: "keyless: 20,000 due jobs without a key", partition: 2,
		fill: `SELECT 'g', $1, '', 'noop', '{}', 25, true, now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, 20000) AS i`},
	{name: "waiting key: its head retries in an hour, 20,000 due jobs behind it, 100 other keys due; the key is skipped (known waiting)", partition: 3, skip: []string{"held"},
		fill: `SELECT 'g', $1, CASE WHEN i <= 20001 THEN 'held' ELSE 'k' || i END, 'noop', '{}', 25, true,
		       CASE WHEN i = 1 THEN now() + interval '1 hour' ELSE now() - interval '1 hour' + i * interval '1 ms' END
		       FROM generate_series(1, 20101) AS i`},
}

func runExplain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newSuiteFlags("explain", stderr)
	verbose := fs.Bool("plans", false, "print every plan in full, not only the summary")
	if err := parseSuiteFlags(fs, args); err != nil {
		return err
	}
	url, where, cleanup, err := database(ctx, true)
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintf(stderr, "server: %s\n", where)
	pool, drop, err := explainDatabase(ctx, url)
	if err != nil {
		return err
	}
	defer drop()
	if err := migrate(ctx, pool, ""); err != nil {
		return err
	}
	setup := []string{
		`ALTER TABLE leasehold.jobs SET (autovacuum_enabled = false)`,
		`INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 16)`,
	}
	for _, s := range setup {
		if _, err := pool.Exec(ctx, s); err != nil {
			return err
		}
	}
	for _, c := range explainCases {
		if _, err := pool.Exec(ctx, `INSERT INTO leasehold.jobs (group_name, partition, key, kind, args, max_attempts, holds, run_at) `+c.fill, c.partition); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	st, err := store.For("")
	if err != nil {
		return err
	}
	fetch := st.Queue.Fetch
	fmt.Fprintf(stdout, "| case | table | fetch | returned | buffers | execution |\n|---|---|---|---|---|---|\n")
	var plans strings.Builder
	for _, analysed := range []bool{false, true} {
		table := "never analysed"
		if analysed {
			table = "analysed"
			if _, err := pool.Exec(ctx, `ANALYZE leasehold.jobs`); err != nil {
				return err
			}
		}
		for _, c := range explainCases {
			var ids []int64
			rows, err := pool.Query(ctx, `SELECT id FROM leasehold.jobs WHERE partition = $1 ORDER BY id LIMIT $2`, c.partition, c.inFlight)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			skip := c.skip
			if skip == nil {
				skip = []string{}
			}
			if ids == nil {
				ids = []int64{}
			}
			for _, f := range []struct {
				name, sql string
				args      []any
			}{
				{"before (NOT EXISTS per candidate)", st.Queue.FetchBefore12, []any{"g", c.partition, 100}},
				{"after (window and per-key probe)", fetch, []any{"g", []int32{int32(c.partition)}, []int32{100}, ids,
					partitionOf(ids, c.partition), skip, partitionOf(skip, c.partition), []string{}}},
			} {
				e, err := explainOne(ctx, pool, f.sql, f.args...)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", c.name, f.name, err)
				}
				fmt.Fprintf(stdout, "| %s | %s | %s | %d | %d | %.2f ms |\n", c.name, table, f.name, e.rows, e.buffers, e.ms)
				fmt.Fprintf(&plans, "\n### %s, %s, %s\n\n```\n%s```\n", c.name, table, f.name, e.text)
			}
		}
	}
	if *verbose {
		fmt.Fprint(stdout, plans.String())
	}
	return nil
}

// explained is one EXPLAIN (ANALYZE, BUFFERS).
type explained struct {
	text    string
	rows    int
	buffers int
	ms      float64
}

func explainOne(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (explained, error) {
	var e explained
	var doc string
	if err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args...).Scan(&doc); err != nil {
		return e, err
	}
	var parsed []struct {
		Plan struct {
			Rows int `json:"Actual Rows"`
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
		Execution float64 `json:"Execution Time"`
	}
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return e, err
	}
	e.rows, e.buffers, e.ms = parsed[0].Plan.Rows, parsed[0].Plan.Hit+parsed[0].Plan.Read, parsed[0].Execution
	rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY ON) `+sql, args...)
	if err != nil {
		return e, err
	}
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return e, err
		}
		b.WriteString(line + "\n")
	}
	e.text = b.String()
	return e, rows.Err()
}

// explainDatabase creates a database of its own on the server at url and
// returns a pool on it, and a function that closes the pool and drops the
// database.
func explainDatabase(ctx context.Context, url string) (*pgxpool.Pool, func(), error) {
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	name := fmt.Sprintf("leasehold_bench_explain_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		admin.Close(ctx)
		return nil, nil, fmt.Errorf("create the bench database (the role needs CREATEDB): %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err == nil {
		cfg.ConnConfig.Database = name
	}
	var pool *pgxpool.Pool
	if err == nil {
		pool, err = pgxpool.NewWithConfig(ctx, cfg)
	}
	drop := func() {
		if pool != nil {
			pool.Close()
		}
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin.Exec(dctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)")
		admin.Close(dctx)
	}
	if err != nil {
		drop()
		return nil, nil, err
	}
	return pool, drop, nil
}

// partitionOf is the fetch's partition array for a list of held ids or
// skipped keys all of partition part.
func partitionOf[T any](xs []T, part int) []int32 {
	in := make([]int32, len(xs))
	for i := range in {
		in[i] = int32(part)
	}
	return in
}
