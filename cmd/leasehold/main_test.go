package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// run executes the CLI with args and returns its standard output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestMigrate(t *testing.T) {
	url := pgtest.URL(t)
	for range 2 { // the second run finds nothing to do
		out, err := run(t, "migrate", "--database-url", url)
		if err != nil {
			t.Fatalf("migrate: %v (output %q)", err, out)
		}
		if !strings.Contains(out, "version "+strconv.Itoa(leasehold.LatestSchemaVersion())) {
			t.Errorf("output %q does not name version %d", out, leasehold.LatestSchemaVersion())
		}
	}
	pool := pgtest.PoolURL(t, url)
	v, err := pgtest.DBOn(t, pool).SchemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := leasehold.LatestSchemaVersion(); v != want {
		t.Fatalf("schema version %d, want %d", v, want)
	}
}

func TestMigrateSchemaFlagAndEnv(t *testing.T) {
	url := pgtest.URL(t)
	t.Setenv("DATABASE_URL", url)
	if out, err := run(t, "migrate", "--schema", "other"); err != nil {
		t.Fatalf("migrate: %v (output %q)", err, out)
	}
	v, err := pgtest.Open(t, pgtest.PoolURL(t, url), leasehold.Config{Schema: "other"}).SchemaVersion(context.Background())
	if err != nil || v != leasehold.LatestSchemaVersion() {
		t.Fatalf("schema other at version %d (err %v), want %d", v, err, leasehold.LatestSchemaVersion())
	}
}

func TestMigrateNewerSchema(t *testing.T) {
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	if _, err := pool.Exec(context.Background(),
		"INSERT INTO leasehold.schema_migrations (version, name) VALUES (9999, 'future')"); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, "migrate", "--database-url", url)
	if !errors.Is(err, leasehold.ErrSchemaTooNew) {
		t.Fatalf("migrate on a newer schema: %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "9999") {
		t.Errorf("error %q does not name the database's version", err)
	}
}

func TestMigrateWithoutURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	_, err := run(t, "migrate")
	if !errors.Is(err, admin.ErrNoDatabase) {
		t.Fatalf("migrate without a URL: %v, want admin.ErrNoDatabase", err)
	}
	if !strings.Contains(err.Error(), "--database-url") || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("error %q does not say how to name a database", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "leasehold ") || !strings.Contains(out, "schema version "+strconv.Itoa(leasehold.LatestSchemaVersion())) {
		t.Fatalf("version output %q", out)
	}
}

func TestMigrateAndVersionJSON(t *testing.T) {
	url := pgtest.URL(t)
	out, err := run(t, "migrate", "--database-url", url, "--json")
	if err != nil {
		t.Fatalf("migrate --json: %v (output %q)", err, out)
	}
	var m struct {
		Schema  string `json:"schema"`
		From    int    `json:"from_version"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || m.Schema != "leasehold" || m.From != 0 ||
		m.Version != leasehold.LatestSchemaVersion() {
		t.Fatalf("migrate --json: %q (%v)", out, err)
	}
	out, err = run(t, "version", "--json")
	var v struct {
		Schema int `json:"schema_version"`
	}
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Schema != leasehold.LatestSchemaVersion() {
		t.Fatalf("version --json: %q (%v)", out, err)
	}
}

func TestMigrateUnreachableDatabase(t *testing.T) {
	_, err := run(t, "migrate", "--database-url", "postgres://nobody@127.0.0.1:1/x", "--connect-timeout", "300ms")
	if !errors.Is(err, admin.ErrUnreachable) {
		t.Fatalf("migrate on a dead database: %v; want admin.ErrUnreachable", err)
	}
}
