package partition_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
)

// Inspect names the incarnation of each member and of each partition's
// holder, so a status screen can tell which process holds what; Groups
// lists the groups.
func TestInspectIncarnationsAndGroups(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	if gs, err := partition.Groups(pgtest.Context(t), pgtest.DBOn(t, pool)); err != nil || len(gs) != 0 {
		t.Fatalf("Groups on an empty schema = %v, %v; want none", gs, err)
	}
	idle := func(ctx context.Context, _ partition.Ownership) { <-ctx.Done() }
	startMember(t, pool, "a", 4, idle)
	startMember(t, pool, "b", 4, idle)
	converged(t, pool, []string{"a", "b"}, 30*time.Second)
	_, err := pool.Exec(pgtest.Context(t), `INSERT INTO leasehold.groups (name, partitions) VALUES ('another', 2)`)
	pgtest.Must(t, err)
	gs, err := partition.Groups(pgtest.Context(t), pgtest.DBOn(t, pool))
	pgtest.Must(t, err)
	if !slices.Equal(gs, []string{"another", "g"}) {
		t.Fatalf("Groups = %v; want [another g]", gs)
	}

	st, err := partition.Inspect(pgtest.Context(t), pgtest.DBOn(t, pool), "g")
	pgtest.Must(t, err)
	inc := map[string]string{}
	for _, m := range st.Members {
		if len(m.Incarnation) < 8 {
			t.Fatalf("member %s: incarnation %q", m.ID, m.Incarnation)
		}
		inc[m.ID] = m.Incarnation
	}
	if len(inc) != 2 || inc["a"] == inc["b"] {
		t.Fatalf("incarnations %v; want two distinct", inc)
	}
	for _, p := range st.Partitions {
		if p.Owner == "" || p.Incarnation != inc[p.Owner] {
			t.Errorf("partition %d: held by %s#%s; members %v", p.Partition, p.Owner, p.Incarnation, inc)
		}
	}
}
