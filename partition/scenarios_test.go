package partition_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// A fleet through the scenarios of issue 26, at test size (8 members x 64
// partitions): all started at once, a rolling deploy (each member stopped
// and started again as a new incarnation, the next once the group has
// converged), and a member cut off from the database (never stopped).
// Across all of them, the lease history (every grant as the database wrote
// it) has at most one live owner per partition and strictly increasing
// tokens, and each partition's Runs began in token order. Controls: the
// same checks flag a history with a grant to another owner, with an older
// token, while the last grant was live, and Runs out of token order.
func TestFleetScenariosKeepOneOwnerAndIncreasingTokens(t *testing.T) {
	t.Parallel()
	const parts = 64
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	pgtest.Must(t, history.Install(ctx, pool, ""))
	rec := &recorder{}
	ids := make([]string, 8)
	members := make([]*partition.Member, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
	}

	// Started all at once.
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { members[i] = startMember(t, pool, id, parts, rec.run(id)) })
	}
	wg.Wait()
	converged(t, pool, ids, 30*time.Second)

	// A rolling deploy.
	for i, id := range ids {
		stopMember(t, members[i])
		members[i] = startMember(t, pool, id, parts, rec.run(id))
		converged(t, pool, ids, 30*time.Second)
	}

	// A member cut off: its partitions are owned again once its leases and
	// membership expired.
	cutPool, proxy := pgtest.ProxiedPool(t, url)
	cut, err := partition.New(pgtest.DBOn(t, cutPool), partition.Config{Group: "g", Partitions: parts, ID: "cut",
		Run: rec.run("cut"), Lease: lease.Config{TTL: testTTL}})
	pgtest.Must(t, err)
	pgtest.Must(t, cut.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cut.Stop(sctx) // its connections are cut: it cannot leave cleanly
	})
	converged(t, pool, append(ids[:len(ids):len(ids)], "cut"), 30*time.Second)
	proxy.Cut()
	converged(t, pool, ids, 30*time.Second)

	vs, err := history.Load(ctx, pool, "")
	pgtest.Must(t, err)
	r := history.Check(vs)
	if !r.OK() {
		t.Fatalf("lease history: %v", r.Violations)
	}
	if r.Names != parts || r.Grants < 2*parts {
		t.Fatalf("lease history: %d grants of %d leases; want every partition granted, several times", r.Grants, r.Names)
	}
	spans := rec.snapshot()
	if bad := runsOutOfTokenOrder(spans); len(bad) > 0 {
		t.Fatalf("runs out of token order: %v", bad)
	}

	// The controls.
	last := vs[len(vs)-1]
	twin := last // another owner granted the lease within the last grant, with an older token
	twin.Seq, twin.Owner, twin.Token = last.Seq+1, "twin", last.Token-1
	twin.AcquiredAt, twin.ExpiresAt = last.ExpiresAt.Add(-time.Millisecond), last.ExpiresAt.Add(time.Second)
	if history.Check(append(vs[:len(vs):len(vs)], twin)).OK() {
		t.Error("control: a second live owner with an older token is not flagged")
	}
	swapped := append([]span(nil), spans...)
	for i := range swapped {
		for j := i + 1; j < len(swapped); j++ {
			if swapped[i].partition == swapped[j].partition && swapped[i].token != swapped[j].token {
				swapped[i].token, swapped[j].token = swapped[j].token, swapped[i].token
				goto check
			}
		}
	}
check:
	if len(runsOutOfTokenOrder(swapped)) == 0 {
		t.Error("control: runs out of token order are not flagged")
	}
}

// runsOutOfTokenOrder returns, per partition, the Runs that began with a
// token no greater than that of a Run begun before them.
func runsOutOfTokenOrder(spans []span) []string {
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	last := map[int]span{}
	var bad []string
	for _, s := range spans {
		if p, ok := last[s.partition]; ok && s.token <= p.token {
			bad = append(bad, fmt.Sprintf("partition %d: %s's token %d began after %s's %d", s.partition, s.member, s.token, p.member, p.token))
		}
		last[s.partition] = s
	}
	return bad
}
