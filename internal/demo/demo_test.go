package demo

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// run tells a story on a database of its own and returns its report and
// the story's steps and details.
func run(t *testing.T, cfg Config) (Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var story strings.Builder
	cfg.DatabaseURL = pgtest.URL(t)
	cfg.Events = func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind != Progress {
			story.WriteString(e.Text + "\n")
		}
	}
	rep, err := Run(ctx, cfg)
	t.Logf("story:\n%s", story.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var n int
	if err := pgtest.PoolURL(t, cfg.DatabaseURL).QueryRow(ctx,
		"SELECT count(*) FROM pg_namespace WHERE nspname = $1", Schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s left behind", Schema)
	}
	return rep, story.String()
}

// The Kafka story: every record of both waves applied exactly once, in
// offset order, the stored offsets at the log end, and the paused worker's
// late batch commits refused, after a takeover that waited for its leases
// to expire.
func TestKafkaStoryAppliesEveryRecordOnceAndRefusesTheZombie(t *testing.T) {
	rep, story := run(t, Config{Kafka: true})
	if !rep.OK || rep.Verdict != chaos.VerdictPass {
		t.Fatalf("verdict %s, violations %q", rep.Verdict, rep.Violations)
	}
	if rep.Jobs != 2*KafkaRecords || rep.Applied != rep.Jobs || rep.Lost+rep.Duplicates+rep.OffsetMismatches+rep.OrderViolations != 0 {
		t.Errorf("records %d, applied %d, lost %d, duplicates %d, offsets %d, order %d",
			rep.Jobs, rep.Applied, rep.Lost, rep.Duplicates, rep.OffsetMismatches, rep.OrderViolations)
	}
	if rep.Refused < 1 || rep.StaleRefused < rep.Refused {
		t.Errorf("refused %d (stale refused %d); want at least 1", rep.Refused, rep.StaleRefused)
	}
	if rep.PauseTakeoverMS < TTL.Milliseconds()/2 {
		t.Errorf("takeover %d ms: faster than the lease could have expired", rep.PauseTakeoverMS)
	}
	for _, want := range []string{"PAUSES", "TAKEOVER", "REFUSED", "owners"} {
		if !strings.Contains(story, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
}

// The negative control: with the effects applied outside the fenced
// transaction, the same story must be caught applying jobs twice, and its
// report must fail.
func TestUnfencedControlFailsTheReport(t *testing.T) {
	rep, _ := run(t, Config{Unfenced: true})
	if rep.OK || rep.Duplicates == 0 || rep.FencedApplied == 0 || rep.Verdict != chaos.VerdictFail {
		t.Fatalf("the unfenced control passed (ok %v, duplicates %d, refused yet applied %d, verdict %s): "+
			"the story or the checker cannot catch a violation", rep.OK, rep.Duplicates, rep.FencedApplied, rep.Verdict)
	}
}
