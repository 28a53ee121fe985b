package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/worker"
)

// relayNode is a test worker consuming topic "in" into the ledger and
// emitting, for each input record, one output record to topic "out"
// through the outbox, published by its relay.
type relayNode struct {
	*kafka.Consumer
	relay *kafka.Relay
	w     *worker.Worker
	id    string
}

// transform is the consume-transform-produce handler: a ledger row and an
// output record (key: the input's key; value: "<input value>/out") per
// input record, in the batch's transaction.
func transform(id string) kafka.Handler {
	ledger := ledgerHandler(id)
	return func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
		if err := ledger(ctx, tx, b); err != nil {
			return err
		}
		recs := make([]outbox.Record, len(b.Records))
		for i, r := range b.Records {
			recs[i] = outbox.Record{Topic: "out", Key: r.Key, Value: []byte(string(r.Value) + "/out"),
				Headers: []outbox.Header{{Key: "input-offset", Value: []byte(strconv.FormatInt(r.Offset, 10))}}}
		}
		return outbox.Add(ctx, tx, recs...)
	}
}

func startRelayNode(t testing.TB, pool *pgxpool.Pool, brokers []string, id string, parts int, log *slog.Logger) *relayNode {
	t.Helper()
	return startRelayNodeWith(t, pool, brokers, id, kafka.Config{Topics: []string{"in"}, Brokers: brokers, PartitionsPerTopic: parts,
		MaxBatch: 50, Handler: transform(id)}, log)
}

// startRelayNodeWith starts a worker of group "g" running a consumer of
// cfg and a relay.
func startRelayNodeWith(t testing.TB, pool *pgxpool.Pool, brokers []string, id string, cfg kafka.Config, log *slog.Logger) *relayNode {
	t.Helper()
	db := pgtest.Open(t, pool, leasehold.Config{Logger: log})
	c, err := kafka.New(db, cfg)
	pgtest.Must(t, err)
	r, err := kafka.NewRelay(db, kafka.RelayConfig{Brokers: brokers, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	pgtest.Must(t, err)
	w, err := worker.New(db, worker.Config{Group: "g", ID: id, Kafka: c, Relay: r, Lease: lease.Config{TTL: 2 * time.Second}})
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(pgtest.ContextFor(t, 30*time.Second)))
	n := &relayNode{Consumer: c, relay: r, w: w, id: id}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return n
}

// outRecord is a record read from the output topic.
type outRecord struct {
	partition int32
	offset    int64
	key       string
	value     string
	header    string
}

// readOutput reads topic's records with read_committed until it has want
// of them or within passes, then for another settle period (to see
// duplicates arriving late).
func readOutput(t testing.TB, brokers []string, topic string, want int, within, settle time.Duration) []outRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	pgtest.Must(t, err)
	defer cl.Close()
	var out []outRecord
	deadline := time.Now().Add(within)
	var until time.Time
	for {
		now := time.Now()
		if until.IsZero() && (len(out) >= want || now.After(deadline)) {
			until = now.Add(settle)
		}
		if !until.IsZero() && now.After(until) {
			return out
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			h := ""
			for _, x := range r.Headers {
				if x.Key == "input-offset" {
					h = string(x.Value)
				}
			}
			out = append(out, outRecord{r.Partition, r.Offset, string(r.Key), string(r.Value), h})
		})
	}
}

// checkOutput returns the violations of: each input record's output is
// in the output exactly once, with its header, in input order per key,
// and nothing else is.
func checkOutput(produced []rec, keys map[string]string, out []outRecord) []string {
	var bad []string
	want := map[string]rec{}
	for _, r := range produced {
		want[r.value+"/out"] = r
	}
	seen := map[string]int{}
	lastByKey := map[string]int64{} // key -> input offset of its last output
	for _, o := range out {
		seen[o.value]++
		r, ok := want[o.value]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("unexpected output %q", o.value))
			continue
		case seen[o.value] == 2:
			bad = append(bad, fmt.Sprintf("output %q published twice", o.value))
		case o.header != strconv.FormatInt(r.offset, 10):
			bad = append(bad, fmt.Sprintf("output %q carries header %q, want %d", o.value, o.header, r.offset))
		}
		k := keys[r.value]
		if o.key != k {
			bad = append(bad, fmt.Sprintf("output %q has key %q, want %q", o.value, o.key, k))
		}
		if last, ok := lastByKey[k+"\x00"+strconv.Itoa(int(r.partition))]; ok && r.offset < last {
			bad = append(bad, fmt.Sprintf("output %q (input offset %d) after input offset %d of key %q", o.value, r.offset, last, k))
		}
		lastByKey[k+"\x00"+strconv.Itoa(int(r.partition))] = r.offset
	}
	var missing []string
	for v := range want {
		if seen[v] == 0 {
			missing = append(missing, v)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		bad = append(bad, fmt.Sprintf("%d outputs missing, first %q", len(missing), missing[0]))
	}
	return bad
}

// keysOf returns the key produce gave each value.
func keysOf(from, n int) map[string]string {
	m := map[string]string{}
	for i := from; i < from+n; i++ {
		m[fmt.Sprintf("v-%d", i)] = fmt.Sprintf("k-%d", i%997)
	}
	return m
}

// Consume-transform-produce: two workers consume "in" into the ledger and
// emit one output record per input through the outbox; one leaves
// gracefully mid-stream. Each input's effects are in the ledger once, and
// its output in "out" once (read_committed), in order per key; the
// outbox is empty at the end.
func TestRelayPublishesEachOutputOnceAcrossAHandoff(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 4, "in", "out")
	pool := newLedger(t)
	a := startRelayNode(t, pool, brokers, "a", 4, testLogger(t))
	startRelayNode(t, pool, brokers, "b", 4, testLogger(t))
	produced := produce(t, brokers, "in", 0, 1000)
	waitOffsets(t, pool, "g", "in", logEnds(produced), 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	pgtest.Must(t, a.w.Stop(ctx))
	cancel()
	produced = append(produced, produce(t, brokers, "in", 1000, 1000)...)
	waitOffsets(t, pool, "g", "in", logEnds(produced), 30*time.Second)
	out := readOutput(t, brokers, "out", len(produced), 30*time.Second, time.Second)
	if bad := checkOutput(produced, keysOf(0, 2000), out); len(bad) > 0 {
		t.Fatalf("%d violations, first %v", len(bad), bad[:min(len(bad), 10)])
	}
	if bad := checkLedger("in", produced, ledger(t, pool)); len(bad) > 0 {
		t.Fatalf("ledger violations: %v", bad)
	}
	if s := a.relay.Stats(); s.Records == 0 || s.Transactions == 0 {
		t.Errorf("worker a's relay published nothing before it left: the handoff was not exercised: %+v", s)
	}
	eventuallyEmpty(t, pool)
}

// eventuallyEmpty waits for the outbox to be published and deleted.
func eventuallyEmpty(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var segs, recs int
		pgtest.Must(t, pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM leasehold.outbox_segments), (SELECT count(*) FROM leasehold.outbox_records)`).Scan(&segs, &recs))
		if segs == 0 && recs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox not emptied: %d segments, %d records left", segs, recs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The output checker catches a duplicate, a missing output, a reordering
// within a key and a wrong header.
func TestCheckOutputCatchesViolations(t *testing.T) {
	produced := []rec{{0, 0, "v-0"}, {0, 1, "v-997"}, {0, 2, "v-1"}}
	keys := map[string]string{"v-0": "k-0", "v-997": "k-0", "v-1": "k-1"}
	good := []outRecord{{0, 0, "k-0", "v-0/out", "0"}, {0, 1, "k-1", "v-1/out", "2"}, {0, 2, "k-0", "v-997/out", "1"}}
	if bad := checkOutput(produced, keys, good); len(bad) > 0 {
		t.Fatalf("a correct output reported: %v", bad)
	}
	cases := map[string][]outRecord{
		"duplicate": append(append([]outRecord{}, good...), good[0]),
		"missing":   good[:2],
		"reordered": {good[2], good[1], good[0]},
		"header":    {{0, 0, "k-0", "v-0/out", "7"}, good[1], good[2]},
	}
	for name, out := range cases {
		if bad := checkOutput(produced, keys, out); len(bad) == 0 {
			t.Errorf("%s: not caught", name)
		} else if !strings.Contains(strings.Join(bad, ";"), "") {
			t.Errorf("%s: %v", name, bad)
		}
	}
}

// A consume-transform-produce owner paused inside its handler while its
// lease is taken over: its commit is refused by the fence, its outbox
// records with its effects, and the next grant's output is the only one.
func TestStaleOwnersOutputIsRefused(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "in", "out")
	produced := produceTo(t, brokers, "in", 0, 5)
	pool := newLedger(t)
	ctx := pgtest.ContextFor(t, time.Minute)
	inside, release := make(chan fence.Token, 1), make(chan struct{})
	var calls atomic.Int32
	inner := transform("w")
	n := startRelayNodeWith(t, pool, brokers, "w", kafka.Config{Topics: []string{"in"}, Brokers: brokers, PartitionsPerTopic: 1,
		Fence: lease.FenceConfig{IdleTimeout: 30 * time.Second},
		Handler: func(ctx context.Context, tx pgx.Tx, b *kafka.Batch) error {
			if err := inner(ctx, tx, b); err != nil {
				return err
			}
			if calls.Add(1) == 1 {
				inside <- b.Token
				<-release // a pause: the lease is taken over meanwhile
			}
			return nil
		}}, testLogger(t))
	stale := <-inside
	var usurper int64
	pgtest.Must(t, pool.QueryRow(ctx, `UPDATE leasehold.leases SET token = nextval('leasehold.lease_token_seq'), owner = 'usurper'
		WHERE name = 'partition/g/0' RETURNING token`).Scan(&usurper))
	close(release)
	eventually(t, 20*time.Second, "the stale commit refused", func() bool { return n.Stats().Fenced == 1 })
	waitOffsets(t, pool, "g", "in", map[int32]int64{0: 5}, 30*time.Second)
	keys := map[string]string{}
	for _, r := range produced {
		keys[r.value] = ""
	}
	out := readOutput(t, brokers, "out", len(produced), 20*time.Second, 500*time.Millisecond)
	if bad := checkOutput(produced, keys, out); len(bad) > 0 {
		t.Fatalf("output violations: %v", bad)
	}
	var staleSegments int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.outbox_segments WHERE token = $1`, int64(stale)).Scan(&staleSegments))
	if staleSegments > 0 {
		t.Fatalf("%d outbox segments of the stale owner (token %d) committed", staleSegments, stale)
	}
}
