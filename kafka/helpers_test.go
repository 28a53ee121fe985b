package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// cluster starts an in-process Kafka (kfake) with the topics seeded.
func cluster(t testing.TB, partitions int32, topics ...string) []string {
	t.Helper()
	return fakeCluster(t, partitions, topics...).ListenAddrs()
}

func fakeCluster(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	pgtest.Must(t, err)
	t.Cleanup(c.Close)
	return c
}

// rec is one produced record as the log holds it.
type rec struct {
	partition int32
	offset    int64
	value     string
}

// produce writes n records to topic, spread over its partitions by key,
// and returns them as the log holds them.
func produce(t testing.TB, brokers []string, topic string, from, n int) []rec {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(time.Millisecond), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	pgtest.Must(t, err)
	defer cl.Close()
	var mu sync.Mutex
	var out []rec
	var firstErr error
	ctx := pgtest.ContextFor(t, time.Minute)
	for i := from; i < from+n; i++ {
		v := fmt.Sprintf("v-%d", i)
		cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k-%d", i%997)), Value: []byte(v)}, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			out = append(out, rec{r.Partition, r.Offset, string(r.Value)})
		})
	}
	pgtest.Must(t, cl.Flush(ctx))
	pgtest.Must(t, firstErr)
	return out
}

// produceTo writes n records to one partition of topic.
func produceTo(t testing.TB, brokers []string, topic string, p int32, n int) []rec {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	pgtest.Must(t, err)
	defer cl.Close()
	var out []rec
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
		pgtest.Must(t, cl.ProduceSync(pgtest.ContextFor(t, time.Minute), r).FirstErr())
		out = append(out, rec{r.Partition, r.Offset, string(r.Value)})
	}
	return out
}

const ledgerDDL = `CREATE TABLE ledger (
	seq bigserial PRIMARY KEY, topic text NOT NULL, partition int NOT NULL, "offset" bigint NOT NULL,
	value text NOT NULL, token bigint NOT NULL, worker text NOT NULL)`

// ledgerHandler inserts one ledger row per record, in one statement.
func ledgerHandler(worker string) kafka.Handler {
	return func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
		n := len(b.Records)
		parts, offs, vals := make([]int32, n), make([]int64, n), make([]string, n)
		for i, r := range b.Records {
			parts[i], offs[i], vals[i] = r.Partition, r.Offset, string(r.Value)
		}
		_, err := tx.Exec(ctx, `INSERT INTO ledger (topic, partition, "offset", value, token, worker)
			SELECT $1, p, o, v, $2, $3 FROM unnest($4::int[], $5::bigint[], $6::text[]) WITH ORDINALITY AS u(p, o, v, i)
			ORDER BY i`, b.Topic, int64(b.Token), worker, parts, offs, vals)
		return err
	}
}

// row is one ledger row.
type row struct {
	seq       int64
	topic     string
	partition int32
	offset    int64
	value     string
	token     int64
}

func ledger(t testing.TB, pool *pgxpool.Pool) []row {
	t.Helper()
	rows, err := pool.Query(pgtest.ContextFor(t, time.Minute), `SELECT seq, topic, partition, "offset", value, token FROM ledger ORDER BY seq`)
	pgtest.Must(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.seq, &x.topic, &x.partition, &x.offset, &x.value, &x.token)
	})
	pgtest.Must(t, err)
	return out
}

// checkLedger returns the violations of: every produced record of topic is
// in the ledger exactly once with its value, nothing else is, and per
// partition the ledger (in commit order, seq) holds the records in offset
// order, with tokens never decreasing.
func checkLedger(topic string, produced []rec, rows []row) []string {
	var bad []string
	want := map[[2]int64]string{}
	for _, r := range produced {
		want[[2]int64{int64(r.partition), r.offset}] = r.value
	}
	seen := map[[2]int64]int{}
	lastOff := map[int32]int64{}
	lastTok := map[int32]int64{}
	sorted := append([]row(nil), rows...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].seq < sorted[j].seq })
	for _, r := range sorted {
		if r.topic != topic {
			continue
		}
		k := [2]int64{int64(r.partition), r.offset}
		seen[k]++
		v, ok := want[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%d/%d: not a produced record", r.partition, r.offset))
		case v != r.value:
			bad = append(bad, fmt.Sprintf("%d/%d: value %q, produced %q", r.partition, r.offset, r.value, v))
		}
		if seen[k] == 2 {
			bad = append(bad, fmt.Sprintf("%d/%d: applied more than once", r.partition, r.offset))
		}
		if last, ok := lastOff[r.partition]; ok && r.offset <= last {
			bad = append(bad, fmt.Sprintf("partition %d: offset %d applied after %d", r.partition, r.offset, last))
		}
		if r.token < lastTok[r.partition] {
			bad = append(bad, fmt.Sprintf("partition %d: token %d applied after %d", r.partition, r.token, lastTok[r.partition]))
		}
		lastOff[r.partition], lastTok[r.partition] = r.offset, r.token
	}
	missing := 0
	for k := range want {
		if seen[k] == 0 {
			if missing < 5 {
				bad = append(bad, fmt.Sprintf("%d/%d: never applied", k[0], k[1]))
			}
			missing++
		}
	}
	if missing >= 5 {
		bad = append(bad, fmt.Sprintf("%d records never applied in all", missing))
	}
	return bad
}

// logEnds returns each partition's end offset as the produced records say.
func logEnds(produced []rec) map[int32]int64 {
	ends := map[int32]int64{}
	for _, r := range produced {
		ends[r.partition] = max(ends[r.partition], r.offset+1)
	}
	return ends
}

// checkOffsets returns the partitions whose stored offset differs from the
// log end.
func checkOffsets(t testing.TB, pool *pgxpool.Pool, group, topic string, ends map[int32]int64) []string {
	t.Helper()
	offs, err := kafka.Offsets(pgtest.ContextFor(t, time.Minute), pgtest.DBOn(t, pool), group)
	pgtest.Must(t, err)
	got := map[int32]int64{}
	for _, o := range offs {
		if o.Topic == topic {
			got[o.Partition] = o.Next
		}
	}
	var bad []string
	for p, e := range ends {
		if got[p] != e {
			bad = append(bad, fmt.Sprintf("%s/%d: stored offset %d, log end %d", topic, p, got[p], e))
		}
	}
	return bad
}

// waitOffsets waits until every stored offset equals the log end.
func waitOffsets(t testing.TB, pool *pgxpool.Pool, group, topic string, ends map[int32]int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		bad := checkOffsets(t, pool, group, topic, ends)
		if len(bad) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored offsets did not reach the log end within %v: %v", within, bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return quiet()
}
