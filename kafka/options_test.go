package kafka_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

// With enough ClientOptions that the shared option slice has spare
// capacity, each owned partition's client still gets its own options: no
// client consumes another's partition (and -race sees no shared write).
func TestManyClientOptionsKeepPartitionsApart(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 8, "t")
	pool := newLedger(t)
	opts := []kgo.Opt{kgo.ClientID("many-options"), kgo.DialTimeout(5 * time.Second), kgo.RequestRetries(5),
		kgo.RetryTimeout(20 * time.Second), kgo.MetadataMinAge(time.Second), kgo.MetadataMaxAge(time.Minute)}
	for n := 5; n <= len(opts); n++ {
		group := "g" + string(rune('0'+n))
		c := start(t, pool, group, group, kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 8,
			ClientOptions: opts[:n], MaxBatch: 20})
		if n == 5 {
			produced := produce(t, brokers, "t", 0, 400)
			waitOffsets(t, pool, group, "t", logEnds(produced), 30*time.Second)
			if bad := checkLedger("t", produced, ledger(t, pool)); len(bad) > 0 {
				t.Fatal(bad)
			}
		}
		stop(t, c)
	}
}

// ClientOptions that make a client consume by itself are refused at the
// worker's Start: the consumer's clients consume exactly the partitions it
// owns.
func TestConsumingClientOptionsAreRefused(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t", "other")
	pool := pgtest.Pool(t)
	for name, opt := range map[string]kgo.Opt{
		"group":      kgo.ConsumerGroup("cg"),
		"topics":     kgo.ConsumeTopics("other"),
		"regex":      kgo.ConsumeRegex(),
		"partitions": kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"other": {0: kgo.NewOffset().AtStart()}}),
	} {
		n := newNode(t, pool, "g", "x", kafka.Config{Topics: []string{"t"}, Brokers: brokers,
			PartitionsPerTopic: 1, ClientOptions: []kgo.Opt{opt}}, testLogger(t))
		if err := n.w.Start(pgtest.ContextFor(t, 20*time.Second)); !errors.Is(err, kafka.ErrInvalidConfig) {
			t.Errorf("%s: Start = %v, want ErrInvalidConfig", name, err)
		}
		pgtest.Must(t, n.w.Stop(pgtest.ContextFor(t, 10*time.Second)))
	}
}
