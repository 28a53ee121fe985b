package queue

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
)

// Two grants of one partition in one Processor (the old one ending while
// the new one starts) changed in one round: one statement cannot upsert a
// row twice, so only the newer grant's set is written, and the round does
// not fail. The control: the statement given both rows fails.
func TestPublishTwoGrantsOfOnePartition(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers(), PublishInterval: time.Hour})
	pgtest.Must(t, err)
	old := p.register(partition.Ownership{Group: "g", Partition: 1, Token: 4})
	cur := p.register(partition.Ownership{Group: "g", Partition: 1, Token: 5})
	old.add(&run{}, 10, "a", func(error) {}, time.Now())
	cur.add(&run{}, 11, "a", func(error) {}, time.Now())
	old.published, old.last = old.version, "[...]" // published before: its end is written (empty)
	p.unregister(old)
	if n, _ := p.round(ctx); n != 1 {
		t.Fatalf("round ran %d statements; want 1", n)
	}
	var token int64
	var jobs string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT token, jobs::text FROM leasehold.running WHERE group_name = 'g' AND partition = 1`).
		Scan(&token, &jobs))
	if token != 5 || !strings.Contains(jobs, `"id": 11`) {
		t.Fatalf("row: token %d, jobs %s; want the newer grant's (token 5, job 11)", token, jobs)
	}
	_, err = pool.Exec(ctx, p.runq.Publish, []string{"g", "g"}, []int32{2, 2}, []int64{4, 5}, []string{"w", "w"},
		[]string{"[]", "[]"}, []int64{}, []string{"[]", "[]"})
	if err == nil || !strings.Contains(err.Error(), "cannot affect row a second time") {
		t.Fatalf("control: publishing two rows of one partition: %v; want the statement refused", err)
	}
	cur.mu.Lock()
	published := cur.published == cur.version
	cur.mu.Unlock()
	if !published {
		t.Fatal("the newer grant's set is not marked published")
	}
}

// The statements read by scanJob (JobInfo, List, the running list, the
// test package's jobs of a kind) return its 25 columns with the same
// types: they share one column list (store's jobColumns).
func TestScanJobStatementsAgree(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	p, err := NewProcessor(pgtest.DBOn(t, pool), ProcessorConfig{Workers: NewWorkers()})
	pgtest.Must(t, err)
	conn, err := pool.Acquire(ctx)
	pgtest.Must(t, err)
	defer conn.Release()
	var want []uint32
	for name, sql := range map[string]string{"Inspect": p.q.Inspect, "List": p.q.List, "ByKind": p.q.ByKind,
		"Running.List": p.runq.List} {
		sd, err := conn.Conn().Prepare(ctx, "", sql)
		pgtest.Must(t, err)
		var got []uint32
		for _, f := range sd.Fields {
			got = append(got, f.DataTypeOID)
		}
		if len(got) != 25 {
			t.Fatalf("%s returns %d columns; scanJob reads 25", name, len(got))
		}
		if want == nil {
			want = got
		} else if !slices.Equal(got, want) {
			t.Fatalf("%s's column types %v differ from %v", name, got, want)
		}
	}
}
