package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// pause and resume store and remove the pause rows workers read, and
// status shows them; an unknown group is refused.
func TestPauseResumeCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.MigratedURL(t)
	pgtest.Must(t, ignoreOut(runIn(t, "", "groups", "create", "mail", "--partitions", "4", "--database-url", url)))
	out, err := runIn(t, "", "pause", "mail", "--reason", "deploy", "--database-url", url)
	if err != nil || !strings.Contains(out, "paused group mail") {
		t.Fatalf("pause: %q, %v", out, err)
	}
	pgtest.Must(t, ignoreOut(runIn(t, "", "pause", "mail", "--kind", "welcome", "--database-url", url)))
	var st admin.Status
	pgtest.Must(t, runJSON(t, &st, "", "status", "--database-url", url))
	if len(st.Groups) != 1 || len(st.Groups[0].Paused) != 2 || st.Groups[0].Paused[0].Kind != "" ||
		st.Groups[0].Paused[0].Reason != "deploy" || st.Groups[0].Paused[1].Kind != "welcome" {
		t.Fatalf("status --json after two pauses: %+v", st.Groups)
	}
	out, err = runIn(t, "", "status", "--database-url", url)
	if err != nil || !strings.Contains(out, "PAUSED: the whole group") || !strings.Contains(out, ": deploy") ||
		!strings.Contains(out, "PAUSED: kind welcome") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	pgtest.Must(t, ignoreOut(runIn(t, "", "resume", "mail", "--database-url", url)))
	pgtest.Must(t, runJSON(t, &st, "", "status", "--database-url", url))
	if ps := st.Groups[0].Paused; len(ps) != 1 || ps[0].Kind != "welcome" {
		t.Fatalf("after resuming the group: %+v; want the kind still paused", ps)
	}
	if _, err := runIn(t, "", "pause", "nope", "--database-url", url); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("pause of an unknown group: %v; want ErrUnknownGroup", err)
	}
}

func ignoreOut(_ string, err error) error { return err }
