package kafka_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

// Offsets are not contiguous: transaction markers and aborted records take
// offsets that the consumer never sees (it reads committed records only).
// The stored offset is the last processed record's offset + 1, and a
// restarted owner continues from it without a gap or a repeat.
func TestTransactionMarkersAndAbortedRecordsLeaveGaps(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID("gaps"),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	pgtest.Must(t, err)
	defer cl.Close()
	ctx := pgtest.ContextFor(t, time.Minute)
	var committed []rec
	txn := func(commit bool, n int) {
		pgtest.Must(t, cl.BeginTransaction())
		var rs []rec
		for i := range n {
			r := &kgo.Record{Partition: 0, Value: []byte(fmt.Sprintf("c%v-%d-%d", commit, len(committed), i))}
			pgtest.Must(t, cl.ProduceSync(ctx, r).FirstErr())
			rs = append(rs, rec{0, r.Offset, string(r.Value)})
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
			committed = append(committed, rs...)
		}
		pgtest.Must(t, cl.EndTransaction(ctx, end))
	}
	txn(true, 5)
	txn(false, 3)
	txn(true, 4)

	pool := newLedger(t)
	cfg := kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1, MaxBatch: 3}
	c := start(t, pool, "g", "a", cfg)
	last := committed[len(committed)-1].offset + 1
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: last}, 20*time.Second)
	stop(t, c)
	if gaps := last - int64(len(committed)); gaps < 4 { // 2 commit markers, 1 abort marker, 3 aborted records
		t.Fatalf("only %d offsets of gaps: the test proves nothing", gaps)
	}

	txn(false, 2)
	txn(true, 3)
	start(t, pool, "g", "b", cfg) // a new owner continues from the stored offset
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: committed[len(committed)-1].offset + 1}, 20*time.Second)
	if bad := checkLedger("t", committed, ledger(t, pool)); len(bad) > 0 {
		t.Fatal(bad)
	}
}
