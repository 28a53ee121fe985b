package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// Every command working on a database says that the schema is not migrated
// and what to run, in one line without the driver's SQLSTATE, both for a
// schema never migrated and one migrated by an older version.
func TestEveryCommandReportsAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	never := pgtest.URL(t)
	older := pgtest.MigratedURL(t)
	_, err := pgtest.PoolURL(t, older).Exec(context.Background(), `DELETE FROM leasehold.schema_migrations WHERE version > 1`)
	pgtest.Must(t, err)
	commands := append(adminCommands, []string{"status", "--group", "g"}, []string{"groups", "list"},
		[]string{"groups", "create", "g", "--partitions", "4"}, []string{"enqueue", "-"})
	for name, tc := range map[string]struct{ url, want string }{
		"never migrated": {never, `schema "leasehold" is not migrated in this database: run ` + "`leasehold migrate`"},
		"older version": {older, fmt.Sprintf(`schema "leasehold" is at version 1, this build of leasehold needs version %d: run `+
			"`leasehold migrate`", leasehold.LatestSchemaVersion())},
	} {
		for _, args := range commands {
			_, err := runIn(t, `{"group":"g","kind":"k"}`, append(args, "--database-url", tc.url)...)
			var nm *admin.NotMigratedError
			if !errors.Is(err, leasehold.ErrNotMigrated) || !errors.As(err, &nm) {
				t.Errorf("%s, %v: %v; want an admin.NotMigratedError", name, args, err)
				continue
			}
			if line := errorLine(err); line != "leasehold: "+tc.want+" (with the same --database-url and --schema)" {
				t.Errorf("%s, %v: reported as\n%s\nwant\nleasehold: %s ...", name, args, line, tc.want)
			}
		}
	}
	// The control: once migrated, the same commands work.
	out, err := runIn(t, "", "migrate", "--database-url", never)
	pgtest.Must(t, err)
	if _, err := runIn(t, "", "groups", "list", "--database-url", never); err != nil {
		t.Fatalf("groups list after migrate (%s): %v", out, err)
	}
}

// The error line has one "leasehold: " prefix, also for leasehold's own
// errors, which carry it.
func TestErrorLineHasOnePrefix(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	_, err := pgtest.PoolURL(t, url).Exec(context.Background(),
		"INSERT INTO leasehold.schema_migrations (version, name) VALUES (9999, 'future')")
	pgtest.Must(t, err)
	var out, stderr bytes.Buffer
	code := execute(pgtest.Context(t), []string{"migrate", "--database-url", url}, strings.NewReader(""), &out, &stderr)
	if code != 1 || !strings.HasPrefix(stderr.String(), "leasehold: schema \"leasehold\" is at version 9999") ||
		strings.Count(stderr.String(), "leasehold: ") != 1 {
		t.Errorf("exit %d, stderr %q; want status 1 and one line with one \"leasehold: \" prefix", code, stderr.String())
	}
}

// The command line is checked: flags out of range, values of the wrong
// type, missing arguments are usage errors that say what is wanted and
// show the usage line; nothing is enqueued.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	for _, tc := range []struct {
		args       []string
		want       string
		notWant    string
		usage      string
		sentinel   error
		wantsUsage bool
	}{
		{args: []string{"jobs", "list", "--group", "g", "--limit", "0"}, want: "--limit 0 is not in 1..10000",
			usage: "usage: leasehold jobs list --group G"},
		{args: []string{"jobs", "list", "--group", "g", "--limit", "10001"}, want: "--limit 10001 is not in 1..10000",
			usage: "usage: leasehold jobs list --group G"},
		{args: []string{"jobs", "list", "--group", "g", "--partition", "x"}, want: `--partition "x": want integers`,
			notWant: "strconv", usage: "usage: leasehold jobs list --group G"},
		{args: []string{"jobs", "list", "--group", "g", "--limit", "many"}, want: `--limit "many": want an integer`,
			notWant: "strconv", usage: "usage: leasehold jobs list --group G"},
		{args: []string{"jobs", "show"}, want: "no job id (leasehold jobs list lists them) given",
			usage: "usage: leasehold jobs show ID..."},
		{args: []string{"jobs", "retry"}, want: "no job id", usage: "usage: leasehold jobs retry ID..."},
		{args: []string{"jobs", "cancel"}, want: "no job id", usage: "usage: leasehold jobs cancel ID..."},
		{args: []string{"enqueue", "--group", "g", "--kind", "k", "--args", ""}, want: "--args is empty; use '{}'"},
		{args: []string{"enqueue", "--group", "g", "--kind", "k", "--delay", "soon"},
			want: `--delay "soon": want a duration such as 500ms, 90s, 5m or 1h`, notWant: "time:", usage: "usage: leasehold enqueue"},
		{args: []string{"batch", "status"}, want: "no batch name given", usage: "usage: leasehold batch status [GROUP] NAME"},
		{args: []string{"batch", "cancel", "g", "b", "c"}, want: "3 arguments given, want [GROUP] NAME",
			usage: "usage: leasehold batch cancel [GROUP] NAME"},
		{args: []string{"batch", "status", "b", "--watch", "--once"}, want: "--watch and --once exclude each other",
			usage: "usage: leasehold batch status"},
		{args: []string{"batch", "submit", "g"}, want: "GROUP NAME: 1 argument(s) given, want 2", usage: "usage: leasehold batch submit GROUP NAME"},
		{args: []string{"batch", "submit", "g", "b", "--chunk", "10001"}, want: "--chunk 10001 is not in 1..10000",
			usage: "usage: leasehold batch submit"},
		{args: []string{"batch", "submit", "g", "b", "--on-success-args", "{}"}, want: "--on-success-args without --on-success KIND",
			usage: "usage: leasehold batch submit"},
		{args: []string{"batch", "list", "--limit", "0"}, want: "--limit 0 is not in 1..10000", usage: "usage: leasehold batch list"},
	} {
		_, err := runIn(t, "", append(tc.args, "--database-url", url)...)
		if !errors.Is(err, admin.ErrBadInput) || !strings.Contains(err.Error(), tc.want) ||
			tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) || !strings.Contains(err.Error(), tc.usage) {
			t.Errorf("%q: %v; want a usage error about %q", tc.args, err, tc.want)
		}
	}
	if n := jobCount(t, pool); n != 0 {
		t.Errorf("%d jobs enqueued by refused commands", n)
	}
	// The controls: the same flags in range are accepted.
	for _, args := range [][]string{
		{"jobs", "list", "--group", "g", "--limit", "1"},
		{"jobs", "list", "--group", "g", "--limit", "10000", "--partition", "0,7"},
		{"enqueue", "--group", "g", "--kind", "k", "--args", "{}", "--delay", "1s"},
		{"batch", "submit", "g", "b", "--chunk", "10000"},
		{"batch", "status", "g", "b", "--once"},
		{"batch", "list", "--limit", "10000"},
	} {
		if _, err := runIn(t, "", append(args, "--database-url", url)...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// A partition the group does not have is an error naming the group's
// count, not an empty list.
func TestJobsListPartitionBeyondTheGroup(t *testing.T) {
	t.Parallel()
	url, _ := adminDB(t) // g has 8 partitions
	_, err := runIn(t, "", "jobs", "list", "--group", "g", "--partition", "3,8", "--database-url", url)
	if !errors.Is(err, queue.ErrInvalidFilter) || !strings.Contains(err.Error(), `partition 8: group "g" has 8 partitions (0 to 7)`) {
		t.Errorf("--partition 8 of 8: %v; want ErrInvalidFilter naming the count", err)
	}
	out, err := runIn(t, "", "jobs", "list", "--group", "g", "--partition", "7", "--database-url", url)
	if err != nil || strings.TrimSpace(out) != "no jobs" {
		t.Errorf("--partition 7 of 8: %q, %v; want no jobs", out, err)
	}
}

// A database server that rejects the connection (here: no such database)
// is reported at once with its reason, not as unreachable after the
// connect timeout (10 minutes here, beyond the test's context).
func TestRejectedConnectionIsReportedAtOnce(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	pgtest.Must(t, err)
	u.Path = "/no_such_database"
	for _, args := range adminCommands {
		_, err := runIn(t, "", append(args, "--database-url", u.String(), "--connect-timeout", "10m")...)
		if !errors.Is(err, admin.ErrRejected) || errors.Is(err, admin.ErrUnreachable) ||
			!strings.Contains(err.Error(), `database "no_such_database" does not exist`) || strings.Contains(err.Error(), "within") {
			t.Errorf("%v on a database that does not exist: %v; want admin.ErrRejected with the server's reason", args, err)
		}
	}
}

// A key that is not UTF-8 is reported as such, not as too long.
func TestEnqueueInvalidUTF8Key(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	for _, flag := range []string{"--key", "--unique-key"} {
		_, err := runIn(t, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "k", flag, "a\xffb")
		if !errors.Is(err, queue.ErrInvalidJob) || !strings.Contains(err.Error(), `"a\xffb" is not valid UTF-8`) ||
			strings.Contains(err.Error(), "at most 255") {
			t.Errorf("%s with invalid UTF-8: %v; want an error saying it is not UTF-8", flag, err)
		}
		_, err = runIn(t, "", "enqueue", "--database-url", url, "--group", "g", "--kind", "k", flag, strings.Repeat("é", 128))
		if !errors.Is(err, queue.ErrInvalidJob) || !strings.Contains(err.Error(), "256 bytes; at most 255 bytes") {
			t.Errorf("%s of 256 bytes: %v; want an error saying it is too long", flag, err)
		}
	}
	if n := jobCount(t, pool); n != 0 {
		t.Errorf("%d jobs enqueued", n)
	}
}

// errWriter fails every write with err.
type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

// A standard output closed by its reader (`leasehold status | head`) ends
// the command quietly with status 0; another write error is reported (the
// control).
func TestClosedStdoutEndsQuietly(t *testing.T) {
	t.Parallel()
	url, _ := adminDB(t)
	for _, tc := range []struct {
		err      error
		code     int
		reported bool
	}{{syscall.EPIPE, 0, false}, {syscall.ENOSPC, 1, true}} {
		for _, args := range [][]string{{"status"}, {"groups", "list"}, {"status", "--json"}} {
			var stderr bytes.Buffer
			code := execute(pgtest.Context(t), append(args, "--database-url", url), strings.NewReader(""),
				errWriter{fmt.Errorf("write /dev/stdout: %w", tc.err)}, &stderr)
			if code != tc.code || (stderr.Len() > 0) != tc.reported {
				t.Errorf("%v with stdout failing with %v: exit %d, stderr %q; want exit %d, reported: %v",
					args, tc.err, code, stderr.String(), tc.code, tc.reported)
			}
		}
	}
}

// A lease released by a stopping member shows as released, not as
// expired; a lease that expired (the control, written directly) as
// expired.
func TestStatusShowsReleasedLeases(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	ctx := pgtest.Context(t)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{Group: "g", Partitions: 2, ID: "w1",
		Run:   func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() },
		Lease: lease.Config{TTL: 10 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	for start := time.Now(); len(m.Owned()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("member holds %d of 2 partitions after 30s", len(m.Owned()))
		}
	}
	pgtest.Must(t, m.Stop(ctx)) // releases both
	_, err = pool.Exec(ctx, `INSERT INTO leasehold.groups (name, partitions) VALUES ('h', 1);
		INSERT INTO leasehold.leases (name, owner, token, acquired_at, renewed_at, expires_at)
		VALUES ('partition/h/0', 'w2#inc', 1, now() - interval '1 minute', now() - interval '20 seconds', now() - interval '10 seconds')`)
	pgtest.Must(t, err)

	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status", "--database-url", url))
	if len(rep.Groups) != 2 {
		t.Fatalf("groups %+v", rep.Groups)
	}
	for _, g := range rep.Groups {
		for _, p := range g.Partitions {
			if p.Held || p.Released != (g.Group == "g") {
				t.Errorf("group %s, partition %d: held %v, released %v; want released only in g", g.Group, p.Partition, p.Held, p.Released)
			}
		}
	}
	out, err := runIn(t, "", "status", "--database-url", url)
	pgtest.Must(t, err)
	if strings.Count(out, "released ") != 2 || strings.Count(out, "expired ") != 1 {
		t.Errorf("want 2 released leases (g) and 1 expired (h):\n%s", out)
	}
}
