package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
)

// runIn executes the CLI with args and stdin, and returns its standard
// output alone.
func runIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// runJSON runs the CLI with --json and decodes its output into v.
func runJSON(t *testing.T, v any, stdin string, args ...string) error {
	t.Helper()
	out, err := runIn(t, stdin, append(args, "--json")...)
	if out != "" {
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if derr := dec.Decode(v); derr != nil {
			t.Fatalf("%v: output is not the JSON expected: %v\n%s", args, derr, out)
		}
		if _, derr := dec.Token(); derr != io.EOF {
			t.Fatalf("%v: more than one JSON value in the output:\n%s", args, out)
		}
	}
	return err
}

// adminDB returns the URL of a migrated database with the group "g" of 8
// partitions, and a pool on it.
func adminDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	_, err := pool.Exec(context.Background(), `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', 8)`)
	pgtest.Must(t, err)
	return url, pool
}

func jobCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	pgtest.Must(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM leasehold.jobs`).Scan(&n))
	return n
}
