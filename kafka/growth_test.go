package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

// addPartitions grows topic to count partitions.
func addPartitions(t testing.TB, brokers []string, topic string, count int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	pgtest.Must(t, err)
	defer cl.Close()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(pgtest.ContextFor(t, 30*time.Second), cl)
	pgtest.Must(t, err)
	for _, r := range resp.Topics {
		pgtest.Must(t, kerr.ErrorForCode(r.ErrorCode))
	}
}

// Partitions added to a topic are picked up by the idle slots that map to
// them, and consumed from their start.
func TestPartitionsAddedArePickedUp(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 2, "t")
	pool := newLedger(t)
	cfg := kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 6,
		MetadataInterval: 100 * time.Millisecond}
	var cs []*node
	for _, id := range []string{"a", "b"} {
		cs = append(cs, start(t, pool, "g", id, cfg))
	}
	produced := produce(t, brokers, "t", 0, 200)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 20*time.Second)
	// Every slot is leased, but only the two existing partitions are
	// consumed: the idle slots open no client.
	eventually(t, 20*time.Second, "all 6 slots leased", func() bool {
		var n int
		pgtest.Must(t, pool.QueryRow(pgtest.ContextFor(t, time.Minute),
			`SELECT count(*) FROM leasehold.leases WHERE name LIKE 'partition/g/%' AND expires_at > clock_timestamp()`).Scan(&n))
		return n == 6
	})
	if n := len(cs[0].Stats().Owned) + len(cs[1].Stats().Owned); n != 2 {
		t.Fatalf("%d Kafka partitions consumed before the growth, want 2 (idle slots must wait)", n)
	}
	addPartitions(t, brokers, "t", 5)
	for p := int32(2); p < 5; p++ {
		produced = append(produced, produceTo(t, brokers, "t", p, 20)...)
	}
	ends := logEnds(produced)
	if len(ends) != 5 {
		t.Fatalf("records in %d partitions, want 5", len(ends))
	}
	waitOffsets(t, pool, "g", "t", ends, 20*time.Second)
	if bad := checkLedger("t", produced, ledger(t, pool)); len(bad) > 0 {
		t.Fatal(bad)
	}
}
