package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// A producer deployed before its workers: enqueue is refused until
// `groups create` has created the group (the control), then succeeds;
// create is idempotent and refuses another count; list shows the group.
func TestGroupsCreateLetsAProducerDeployFirst(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	enq := []string{"enqueue", "--database-url", url, "--group", "mail", "--kind", "welcome", "--key", "user-42"}
	_, err := runIn(t, "", enq...)
	if !errors.Is(err, queue.ErrUnknownGroup) || !strings.Contains(err.Error(), "leasehold groups create mail --partitions N") {
		t.Fatalf("enqueue before the group exists: %v; want ErrUnknownGroup saying how to create it", err)
	}
	var res admin.GroupResult
	pgtest.Must(t, runJSON(t, &res, "", "groups", "create", "mail", "--partitions", "16", "--database-url", url))
	if res != (admin.GroupResult{Group: "mail", Partitions: 16, Created: true}) {
		t.Errorf("groups create --json: %+v", res)
	}
	out, err := runIn(t, "", "groups", "create", "mail", "--partitions", "16", "--database-url", url)
	if err != nil || !strings.Contains(out, "group mail exists with 16 partitions: nothing to do") {
		t.Errorf("second create: %q, %v; want nothing to do", out, err)
	}
	_, err = runIn(t, "", "groups", "create", "mail", "--partitions", "8", "--database-url", url)
	var ce *partition.CountError
	if !errors.As(err, &ce) || ce.Stored != 16 || !strings.Contains(errorLine(err), "has 16 partitions, not 8") {
		t.Errorf("create with another count: %v; want a *partition.CountError", err)
	}
	var enqueued []admin.EnqueueResult
	pgtest.Must(t, runJSON(t, &enqueued, "", enq...))
	if len(enqueued) != 1 || enqueued[0].Partition != partition.OfString("user-42", 16) {
		t.Errorf("enqueue after groups create: %+v", enqueued)
	}

	var groups []admin.GroupInfo
	pgtest.Must(t, runJSON(t, &groups, "", "groups", "list", "--database-url", url))
	if len(groups) != 1 || groups[0] != (admin.GroupInfo{Group: "mail", Partitions: 16, Pending: 1}) {
		t.Errorf("groups list --json: %+v", groups)
	}
	out, err = runIn(t, "", "groups", "list", "--database-url", url)
	pgtest.Must(t, err)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "GROUP") ||
		strings.Join(strings.Fields(lines[1]), " ") != "mail 16 0 0 1" {
		t.Errorf("groups list:\n%s", out)
	}
	var n int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT partitions FROM leasehold.groups WHERE name = 'mail'`).Scan(&n))
	if n != 16 {
		t.Errorf("stored count %d; want 16", n)
	}
}

// groups create checks its command line before connecting.
func TestGroupsCreateUsage(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"groups", "create", "--partitions", "4"}, "the group's name: 0 argument(s) given, want 1"},
		{[]string{"groups", "create", "g"}, "--partitions is required"},
		{[]string{"groups", "create", "g", "--partitions", "0"}, "--partitions 0 is not in 1..65536"},
		{[]string{"groups", "create", "g", "--partitions", "70000"}, "--partitions 70000 is not in 1..65536"},
	} {
		_, err := runIn(t, "", tc.args...)
		if !errors.Is(err, admin.ErrBadInput) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "usage: leasehold groups create GROUP --partitions N") {
			t.Errorf("%v: %v; want a usage error about %q", tc.args, err, tc.want)
		}
	}
	var groups []admin.GroupInfo
	pgtest.Must(t, runJSON(t, &groups, "", "groups", "list", "--database-url", pgtest.MigratedURL(t)))
	if groups == nil || len(groups) != 0 {
		t.Errorf("groups list --json of no group: %#v; want []", groups)
	}
}
