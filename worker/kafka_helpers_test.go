package worker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

// kafkaCluster starts an in-process Kafka (kfake) with topic "t" of n
// partitions; it is closed when the test ends.
func kafkaCluster(t *testing.T, n int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(n, "t"))
	pgtest.Must(t, err)
	t.Cleanup(c.Close)
	return c
}

// produceRecords writes n records to topic "t", round robin over its
// partitions, and raises ends to each partition's log end.
func produceRecords(t *testing.T, brokers []string, n int, ends map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	pgtest.Must(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, "v-%d", i)}
	}
	for _, r := range cl.ProduceSync(pgtest.Context(t), recs...) {
		pgtest.Must(t, r.Err)
		ends[r.Record.Partition] = max(ends[r.Record.Partition], r.Record.Offset+1)
	}
}

// kafkaLedgerSetup creates the table the Kafka handlers write to.
func kafkaLedgerSetup(t *testing.T, pool *pgxpool.Pool) {
	_, err := pool.Exec(pgtest.Context(t), `CREATE TABLE kafka_ledger (
		n bigserial PRIMARY KEY, partition int NOT NULL, "offset" bigint NOT NULL, token bigint NOT NULL, worker text NOT NULL)`)
	pgtest.Must(t, err)
}

// consumer returns a consumer of topic "t" (perTopic partition slots)
// whose handler appends one kafka_ledger row per record, tagged name.
func consumer(t *testing.T, pool *pgxpool.Pool, brokers []string, perTopic int, name string) *kafka.Consumer {
	t.Helper()
	c, err := kafka.New(pgtest.DBOn(t, pool), kafka.Config{Topics: []string{"t"}, Brokers: brokers,
		PartitionsPerTopic: perTopic, MetadataInterval: 100 * time.Millisecond,
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			for _, r := range b.Records {
				if _, err := tx.Exec(ctx, `INSERT INTO kafka_ledger (partition, "offset", token, worker) VALUES ($1, $2, $3, $4)`,
					b.Partition, r.Offset, int64(b.Token), name); err != nil {
					return err
				}
			}
			return nil
		}})
	pgtest.Must(t, err)
	return c
}

// waitOffsets waits until every stored offset of group "g" is at its
// partition's log end.
func waitOffsets(t *testing.T, pool *pgxpool.Pool, ends map[int32]int64) {
	t.Helper()
	ctx, db := pgtest.Context(t), pgtest.DBOn(t, pool)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		offs, err := kafka.Offsets(ctx, db, "g")
		pgtest.Must(t, err)
		at := 0
		for _, o := range offs {
			if o.Next == ends[o.Partition] {
				at++
			}
		}
		if at == len(ends) {
			return
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("%d of %d stored offsets at the log end: %+v, want %v", at, len(ends), offs, ends)
		}
	}
}

// checkKafkaLedger returns the violations of: every record below ends is
// in kafka_ledger (read through db) exactly once, and nothing else is; and
// how many records each worker applied.
func checkKafkaLedger(t *testing.T, db fence.Querier, ends map[int32]int64) (bad []string, byWorker map[string]int) {
	t.Helper()
	rows, err := db.Query(pgtest.Context(t), `SELECT partition, "offset", worker FROM kafka_ledger ORDER BY n`)
	pgtest.Must(t, err)
	seen := map[[2]int64]int{}
	byWorker = map[string]int{}
	var p, o int64
	var w string
	_, err = pgx.ForEachRow(rows, []any{&p, &o, &w}, func() error {
		seen[[2]int64{p, o}]++
		byWorker[w]++
		if o >= ends[int32(p)] {
			bad = append(bad, fmt.Sprintf("%d/%d: not a produced record", p, o))
		}
		if seen[[2]int64{p, o}] == 2 {
			bad = append(bad, fmt.Sprintf("%d/%d: applied twice", p, o))
		}
		return nil
	})
	pgtest.Must(t, err)
	for part, end := range ends {
		for off := range end {
			if seen[[2]int64{int64(part), off}] == 0 {
				bad = append(bad, fmt.Sprintf("%d/%d: never applied", part, off))
			}
		}
	}
	return bad, byWorker
}

// get requests path of h and returns the status code and body.
func get(h http.Handler, path string) (int, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// eventually waits until ok holds, failing the test after a minute.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for start := time.Now(); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("not within a minute: %s", what)
		}
	}
}
