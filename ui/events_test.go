package ui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// An owner whose lease was granted anew while its job ran has the job's
// outcome refused by the fence: the ownership map lists the refusal
// (li[data-event-kind=fenced]) with the stale token and a link to the job,
// after the owner's handoff.
func TestGroupShowsFencedRefusal(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("k", i); partition.OfString(k, 4) == 0 {
			key = k
		}
	}
	id := e.enqueue(queue.Job{Key: key, Args: note{Text: "x"}})

	lc, err := lease.New(pgtest.DBOn(t, e.pool), lease.Config{Owner: "stale-owner"})
	pgtest.Must(t, err)
	t.Cleanup(func() { lc.Close(context.Background()) })
	l, err := lc.TryAcquire(ctx, partition.LeaseName("emails", 0))
	pgtest.Must(t, err)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[note]) error {
		// A newer grant of the partition, as after a takeover while the
		// job ran.
		_, err := e.pool.Exec(ctx, `UPDATE leasehold.leases SET token = nextval('leasehold.lease_token_seq') WHERE name = $1`, l.Name())
		return err
	})
	p, err := queue.NewProcessor(pgtest.DBOn(t, e.pool), queue.ProcessorConfig{Workers: ws, PollInterval: time.Hour})
	pgtest.Must(t, err)
	p.Run(ctx, partition.Ownership{Group: "emails", Partition: 0, Token: l.Token(), Lease: l}) // returns when fenced

	r := e.page("/groups/emails")
	evs := byID(r.Doc, "events")
	fenced := withAttr(evs, "data-event-kind", "fenced")
	if len(fenced) != 1 {
		t.Fatalf("#events: %d fenced refusals; want 1: %q", len(fenced), text(evs))
	}
	links := all(fenced[0], func(n *nodeT) bool { return n.Data == "a" && attr(n, "href") == "/jobs/"+itoa(id) })
	if len(links) != 1 || !strings.Contains(text(fenced[0]), fmt.Sprintf("stale token %d", l.Token())) ||
		!strings.Contains(text(fenced[0]), "stale-owner") {
		t.Errorf("the fenced refusal: %q; want job %d, stale-owner and token %d", text(fenced[0]), id, l.Token())
	}
	if h := withAttr(evs, "data-event-kind", "handoff"); len(h) != 1 || attr(h[0], "data-partition") != "0" {
		t.Errorf("#events: want the stale owner's handoff of partition 0: %q", text(evs))
	}
	if s := e.state(id); s != queue.StatePending {
		t.Errorf("the fenced job is %s; want pending (its outcome refused)", s)
	}
}
