package kafka_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
)

// storeOffset writes a stored offset behind the consumer's back (as an
// operator, or a stale table, would).
func storeOffset(t testing.TB, pool *pgxpool.Pool, group, topic string, p int32, next int64) {
	t.Helper()
	_, err := pool.Exec(pgtest.ContextFor(t, time.Minute), `
		INSERT INTO leasehold.groups (name, partitions) VALUES ($1, 1) ON CONFLICT DO NOTHING;`, group)
	pgtest.Must(t, err)
	_, err = pool.Exec(pgtest.ContextFor(t, time.Minute), `
		INSERT INTO leasehold.kafka_offsets (group_name, topic, partition, next_offset, token) VALUES ($1, $2, $3, $4, 0)
		ON CONFLICT (group_name, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset`, group, topic, p, next)
	pgtest.Must(t, err)
}

func storedOffset(t testing.TB, pool *pgxpool.Pool, group, topic string, p int32) int64 {
	t.Helper()
	offs, err := kafka.Offsets(pgtest.ContextFor(t, time.Minute), pgtest.DBOn(t, pool), group)
	pgtest.Must(t, err)
	for _, o := range offs {
		if o.Topic == topic && o.Partition == p {
			return o.Next
		}
	}
	return -1
}

func eventually(t testing.TB, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stored offset below the log start (retention ran past records never
// processed) gives the configured behaviour, never a silent reset.
func TestStoredOffsetBelowTheLogStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		policy kafka.OutOfRange
		stored int64
	}{
		{"fail", kafka.OutOfRangeFail, 10},
		{"earliest", kafka.OutOfRangeEarliest, 10},
		{"latest", kafka.OutOfRangeLatest, 10},
		{"fail above the end", kafka.OutOfRangeFail, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kc := fakeCluster(t, 1, "t")
			brokers := kc.ListenAddrs()
			produced := produceTo(t, brokers, "t", 0, 100)
			pgtest.Must(t, kc.DeleteRecords("t", 0, 50)) // retention: the log starts at 50
			pool := newLedger(t)
			storeOffset(t, pool, "g", "t", 0, tc.stored)
			c := start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers,
				PartitionsPerTopic: 1, OutOfRange: tc.policy, RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond})
			switch tc.policy {
			case kafka.OutOfRangeFail:
				eventually(t, 20*time.Second, "the partition reported stalled", func() bool { return len(c.Stats().Stalled) == 1 })
				oe := c.Stats().Stalled[0]
				if oe.Topic != "t" || oe.Partition != 0 || oe.Stored != tc.stored || oe.LogStart != 50 || oe.LogEnd != 100 {
					t.Fatalf("OffsetError = %+v", oe)
				}
				time.Sleep(300 * time.Millisecond) // several retries
				if n := len(ledger(t, pool)); n != 0 {
					t.Fatalf("%d records applied from an out-of-range offset", n)
				}
				if got := storedOffset(t, pool, "g", "t", 0); got != tc.stored {
					t.Fatalf("stored offset changed to %d, want %d kept", got, tc.stored)
				}
				// An operator corrects the offset: the owner picks it up.
				storeOffset(t, pool, "g", "t", 0, 60)
				waitOffsets(t, pool, "g", "t", map[int32]int64{0: 100}, 20*time.Second)
				if bad := checkLedger("t", produced[60:], ledger(t, pool)); len(bad) > 0 {
					t.Fatalf("after the correction: %v", bad)
				}
				if s := c.Stats(); len(s.Stalled) != 0 || s.Resets != 0 {
					t.Fatalf("stats after the correction: %+v", s)
				}
			case kafka.OutOfRangeEarliest:
				waitOffsets(t, pool, "g", "t", map[int32]int64{0: 100}, 20*time.Second)
				if bad := checkLedger("t", produced[50:], ledger(t, pool)); len(bad) > 0 {
					t.Fatalf("restart at the earliest offset: %v", bad)
				}
				if s := c.Stats(); s.Resets != 1 {
					t.Fatalf("Resets = %d, want 1", s.Resets)
				}
			case kafka.OutOfRangeLatest:
				waitOffsets(t, pool, "g", "t", map[int32]int64{0: 100}, 20*time.Second)
				more := produceTo(t, brokers, "t", 0, 5)
				waitOffsets(t, pool, "g", "t", map[int32]int64{0: 105}, 20*time.Second)
				if bad := checkLedger("t", more, ledger(t, pool)); len(bad) > 0 {
					t.Fatalf("restart at the latest offset: %v", bad)
				}
				if s := c.Stats(); s.Resets != 1 {
					t.Fatalf("Resets = %d, want 1", s.Resets)
				}
			}
		})
	}
}

// StartLatest stores the log end when a partition is first owned, so
// records produced afterwards are never skipped by a later owner.
func TestStartLatest(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 1, "t")
	produceTo(t, brokers, "t", 0, 30)
	pool := newLedger(t)
	start(t, pool, "g", "w", kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 1,
		StartAt: kafka.StartLatest})
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: 30}, 20*time.Second)
	more := produceTo(t, brokers, "t", 0, 7)
	waitOffsets(t, pool, "g", "t", map[int32]int64{0: 37}, 20*time.Second)
	if bad := checkLedger("t", more, ledger(t, pool)); len(bad) > 0 {
		t.Fatal(bad)
	}
}
