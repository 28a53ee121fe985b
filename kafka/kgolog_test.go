package kafka_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/kafka"
)

// A broker that goes away while partitions are consumed shows in the
// consumer's log (franz-go's warnings), instead of a silent retry loop.
func TestBrokerGoneIsLogged(t *testing.T) {
	t.Parallel()
	kc := fakeCluster(t, 2, "t")
	brokers := kc.ListenAddrs()
	pool := newLedger(t)
	var logs logtest.Buffer
	c := startLog(t, pool, "g", "a", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 2},
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
	produced := produce(t, brokers, "t", 0, 10)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 30*time.Second)
	kc.Close()
	for start := time.Now(); !strings.Contains(logs.String(), "kafka: franz-go:"); time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("no franz-go warning logged 20s after the broker went away; the log:\n%s", logs.String())
		}
	}
	_ = c
}
