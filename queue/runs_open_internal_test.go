package queue

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// Opening the runs of several partitions in one statement reports, for
// every one of them, the run recorded before and whether it ended
// abruptly (the recovery after a crash and the rate limits' handover
// depend on it). Control: with the upsert free to run before the locking
// read of the previous runs, a partition whose row the statement updated
// first is skipped by FOR UPDATE and seems never run.
func TestBatchedOpenSeesEveryPreviousRun(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, err := pgxpool.New(ctx, pgtest.MigratedURL(t))
	pgtest.Must(t, err)
	t.Cleanup(pool.Close)
	p, err := NewProcessor(pgtest.Open(t, pool, leasehold.Config{}), ProcessorConfig{Workers: NewWorkers()})
	pgtest.Must(t, err)
	unlocked := strings.Replace(p.q.OpenRun, " CROSS JOIN (SELECT count(*) FROM prev) AS locked", "", 1)
	if unlocked == p.q.OpenRun {
		t.Fatal("control: the open statement's ordering changed; update the control")
	}
	missed := func(group, stmt string) int {
		open := func(parts []int32, toks []int64) map[int32]*int64 {
			owners := make([]string, len(parts))
			rows, err := pool.Query(ctx, stmt, group, parts, toks, owners)
			pgtest.Must(t, err)
			prev := make(map[int32]*int64)
			for rows.Next() {
				var part int32
				var tok *int64
				var open, recorded bool
				var rate []byte
				var since int64
				pgtest.Must(t, rows.Scan(&part, &tok, &open, &recorded, &rate, &since))
				prev[part] = tok
			}
			pgtest.Must(t, rows.Err())
			return prev
		}
		open([]int32{0, 1, 3, 2, 4, 5, 6, 7}, []int64{1, 2, 4, 3, 5, 6, 7, 8})
		n := 0
		for _, tok := range open([]int32{7, 6, 3, 5, 1, 2, 0, 4}, []int64{16, 14, 10, 24, 20, 22, 18, 12}) {
			if tok == nil {
				n++
			}
		}
		return n
	}
	if n := missed("fixed", p.q.OpenRun); n > 0 {
		t.Errorf("%d of 8 partitions opened together seemed never run before", n)
	}
	if n := missed("control", unlocked); n == 0 {
		t.Error("control: without the ordering every previous run was seen; the test cannot fail")
	}
}
