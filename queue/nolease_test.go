package queue_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// An Ownership without its Lease is refused at once with ErrNoLease: Serve
// returns it, Run logs it at ERROR and returns; neither waits for its
// context (which here never ends before the test does) nor panics.
func TestRunWithoutLeaseIsRefused(t *testing.T) {
	t.Parallel()
	pool, _ := setup(t)
	// Bounds the old behaviour (Run waited for its context): the refusal
	// itself takes no time.
	ctx := pgtest.ContextFor(t, 20*time.Second)
	var logs logtest.Buffer
	p, err := queue.NewProcessor(pgtest.Open(t, pool, leasehold.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}),
		queue.ProcessorConfig{Workers: queue.NewWorkers()})
	pgtest.Must(t, err)
	o := partition.Ownership{Group: "emails", Partition: 3, Token: 7}
	if err := p.Serve(ctx, o); !errors.Is(err, queue.ErrNoLease) {
		t.Fatalf("Serve: %v; want ErrNoLease", err)
	}
	p.Run(ctx, o)
	if ctx.Err() != nil {
		t.Fatal("Run returned only when the test's context ended")
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, queue.ErrNoLease.Error()) {
		t.Fatalf("Run logged %q; want the ErrNoLease error at ERROR", l)
	}
}
