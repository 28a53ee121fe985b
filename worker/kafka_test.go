package worker_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A worker running a Kafka consumer serves the Kafka counters and the
// partition and lease metrics on its Handler, and none of the queue's;
// /healthz and /readyz answer 200 while it runs and 503 after Stop, and
// Stop unregisters every metric.
func TestKafkaWorkerServesKafkaAndPartitionMetrics(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	kafkaLedgerSetup(t, pool)
	brokers := kafkaCluster(t, 4).ListenAddrs()
	c := consumer(t, pool, brokers, 4, "w")
	reg := prometheus.NewRegistry()
	w := start(t, pool, worker.Config{ID: "w", Kafka: c, Registerer: reg})
	ends := map[int32]int64{}
	produceRecords(t, brokers, 40, ends)
	eventually(t, "40 records committed on 4 owned partitions", func() bool {
		return c.Stats().Records == 40 && len(w.Owned()) == 4
	})

	const want = `
# HELP leasehold_kafka_records_total Kafka records in the committed batches.
# TYPE leasehold_kafka_records_total counter
leasehold_kafka_records_total{group="g"} 40
# HELP leasehold_kafka_fenced_total Kafka batch commits refused because a newer owner holds the partition (rolled back).
# TYPE leasehold_kafka_fenced_total counter
leasehold_kafka_fenced_total{group="g"} 0
# HELP leasehold_kafka_failed_total Kafka batches rolled back for another reason (handler or database error); handled again.
# TYPE leasehold_kafka_failed_total counter
leasehold_kafka_failed_total{group="g"} 0
# HELP leasehold_kafka_offset_resets_total Stored offsets outside the log reset to the earliest or latest offset (OutOfRange policy).
# TYPE leasehold_kafka_offset_resets_total counter
leasehold_kafka_offset_resets_total{group="g"} 0
# HELP leasehold_kafka_partitions_consumed Kafka partitions this worker consumes now (owned slots whose partition exists).
# TYPE leasehold_kafka_partitions_consumed gauge
leasehold_kafka_partitions_consumed{group="g"} 4
# HELP leasehold_kafka_partitions_stalled Owned Kafka partitions not consumed: their stored offset is outside the log (OutOfRangeFail).
# TYPE leasehold_kafka_partitions_stalled gauge
leasehold_kafka_partitions_stalled{group="g"} 0
# HELP leasehold_kafka_metadata_up 1 if the consumer is open and its last read of the topics' metadata succeeded.
# TYPE leasehold_kafka_metadata_up gauge
leasehold_kafka_metadata_up{group="g"} 1
# HELP leasehold_partitions_owned Partitions this worker holds now.
# TYPE leasehold_partitions_owned gauge
leasehold_partitions_owned{group="g"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "leasehold_kafka_records_total",
		"leasehold_kafka_fenced_total", "leasehold_kafka_failed_total", "leasehold_kafka_offset_resets_total",
		"leasehold_kafka_partitions_consumed", "leasehold_kafka_partitions_stalled", "leasehold_kafka_metadata_up",
		"leasehold_partitions_owned"); err != nil {
		t.Fatal(err)
	}
	if b := counter(t, reg, "leasehold_kafka_batches_total"); b < 4 || b > 40 {
		t.Errorf("leasehold_kafka_batches_total %v; want between 4 (a batch per partition) and 40", b)
	}
	if g := counter(t, reg, "leasehold_partition_grants_total"); g < 4 {
		t.Errorf("leasehold_partition_grants_total %v; want at least the 4 partitions owned", g)
	}
	eventually(t, "a lease renewal observed", func() bool {
		return counter(t, reg, "leasehold_lease_renew_duration_seconds") > 0
	})
	for _, name := range []string{"leasehold_jobs_total", "leasehold_job_duration_seconds", "leasehold_queue_depth",
		"leasehold_queue_stats_up"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
			t.Errorf("%s: %d series (err %v); a Kafka worker has no queue metrics", name, n, err)
		}
	}

	h := w.Handler()
	if code, body := get(h, "/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `leasehold_kafka_records_total{group="g"} 40`) ||
		!strings.Contains(body, `leasehold_partition_grants_total{group="g"}`) {
		t.Errorf("/metrics: %d\n%s", code, body)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(h, p); code != http.StatusOK {
			t.Errorf("%s while running: %d %s", p, code, body)
		}
	}
	sctx, cancel := context.WithTimeout(pgtest.Context(t), 20*time.Second)
	defer cancel()
	pgtest.Must(t, w.Stop(sctx))
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _ := get(h, p); code != http.StatusServiceUnavailable {
			t.Errorf("%s after Stop: %d; want 503", p, code)
		}
	}
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("%d series left registered after Stop", n)
	}
}

// A Kafka worker whose broker goes away reports not ready (the consumer's
// metadata read fails) but stays live: /healthz does not depend on Kafka,
// so an outage does not get it restarted.
func TestKafkaWorkerIsNotReadyWithoutItsBroker(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	kafkaLedgerSetup(t, pool)
	kc := kafkaCluster(t, 2)
	c := consumer(t, pool, kc.ListenAddrs(), 2, "w")
	reg := prometheus.NewRegistry()
	w := start(t, pool, worker.Config{ID: "w", Kafka: c, Registerer: reg})
	h := w.Handler()
	if code, body := get(h, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the broker up: %d %s", code, body)
	}
	kc.Close()
	eventually(t, "/readyz 503 once the broker is gone", func() bool {
		code, body := get(h, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "metadata")
	})
	if err := w.Ready(pgtest.Context(t)); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Errorf("Ready without the broker = %v; want the metadata read's failure", err)
	}
	if v := counter(t, reg, "leasehold_kafka_metadata_up"); v != 0 {
		t.Errorf("leasehold_kafka_metadata_up %v without the broker; want 0", v)
	}
	if code, body := get(h, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz without the broker: %d %s; want 200 (liveness does not depend on Kafka)", code, body)
	}
}

// Run stops a Kafka worker gracefully when its context ends: it returns
// nil, and by then it has released every partition lease, so the other
// worker takes them over at once rather than after the TTL (5 minutes
// here: an expiry could not explain the takeover). Every record is applied
// exactly once across the handoff.
func TestKafkaWorkerRunStopsGracefullyAndHandsOffAtOnce(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool := pgtest.Pool(t)
	kafkaLedgerSetup(t, pool)
	brokers := kafkaCluster(t, 4).ListenAddrs()
	cfg := func(id string) worker.Config {
		c := worker.Config{Group: "g", ID: id, Kafka: consumer(t, pool, brokers, 4, id),
			MembershipPollInterval: 200 * time.Millisecond}
		c.Lease.TTL = 5 * time.Minute
		return c
	}
	w1, err := worker.New(pgtest.DBOn(t, pool), cfg("w1"))
	pgtest.Must(t, err)
	rctx, signal := context.WithCancel(ctx) // the signal, as signal.NotifyContext gives it
	defer signal()
	ran := make(chan error, 1)
	go func() { ran <- w1.Run(rctx) }()
	w2 := start(t, pool, cfg("w2"))
	eventually(t, "both workers own partitions", func() bool {
		o1, o2 := len(w1.Owned()), len(w2.Owned())
		return o1 > 0 && o2 > 0 && o1+o2 == 4
	})
	ends := map[int32]int64{}
	produceRecords(t, brokers, 200, ends)
	waitOffsets(t, pool, ends)

	signal()
	select {
	case err := <-ran:
		pgtest.Must(t, err)
	case <-ctx.Done():
		t.Fatal("Run did not return after its context ended")
	}
	st, err := partition.Inspect(ctx, pgtest.DBOn(t, pool), "g")
	pgtest.Must(t, err)
	for _, p := range st.Partitions {
		if p.Held && p.Owner == "w1" {
			t.Errorf("partition %d: lease still held by w1 (token %d) after its Run returned; want released", p.Partition, p.Token)
		}
	}
	eventually(t, "w2 owns every partition", func() bool { return len(w2.Owned()) == 4 })
	produceRecords(t, brokers, 200, ends)
	waitOffsets(t, pool, ends)
	bad, by := checkKafkaLedger(t, pool, ends)
	if len(bad) > 0 {
		t.Fatalf("%d violations, first: %v", len(bad), bad[:min(5, len(bad))])
	}
	if by["w1"] == 0 || by["w2"] == 0 {
		t.Errorf("records by worker %v: both should have consumed", by)
	}
}

// The negative control of checkKafkaLedger: a duplicate, a missing record
// and a foreign one are flagged.
func TestCheckKafkaLedgerCatchesViolations(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	kafkaLedgerSetup(t, pool)
	ends := map[int32]int64{0: 2, 1: 1}
	_, err := pool.Exec(pgtest.Context(t), `INSERT INTO kafka_ledger (partition, "offset", token, worker)
		VALUES (0, 0, 1, 'a'), (0, 1, 1, 'a'), (1, 0, 1, 'a')`)
	pgtest.Must(t, err)
	if bad, _ := checkKafkaLedger(t, pool, ends); len(bad) != 0 {
		t.Fatalf("a correct ledger is flagged: %v", bad)
	}
	for name, stmt := range map[string]string{
		"duplicate": `INSERT INTO kafka_ledger (partition, "offset", token, worker) VALUES (0, 1, 2, 'b')`,
		"missing":   `DELETE FROM kafka_ledger WHERE partition = 1`,
		"foreign":   `INSERT INTO kafka_ledger (partition, "offset", token, worker) VALUES (1, 7, 2, 'b')`,
	} {
		tx, err := pool.Begin(pgtest.Context(t))
		pgtest.Must(t, err)
		_, err = tx.Exec(pgtest.Context(t), stmt)
		pgtest.Must(t, err)
		if bad, _ := checkKafkaLedger(t, tx, ends); len(bad) == 0 {
			t.Errorf("%s: not flagged", name)
		}
		pgtest.Must(t, tx.Rollback(pgtest.Context(t)))
	}
}

// New refuses a worker with no source or both, and, with Kafka, a
// partition count other than the consumer's and every queue-only setting:
// none is silently ignored.
func TestNewRejectsBadKafkaConfig(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	c := consumer(t, pool, []string{"127.0.0.1:1"}, 4, "x")
	ws := queue.NewWorkers()
	for name, cfg := range map[string]worker.Config{
		"no source":             {Group: "g"},
		"both sources":          {Group: "g", Workers: ws, Kafka: c},
		"other partition count": {Group: "g", Kafka: c, Partitions: 8},
		"concurrency":           {Group: "g", Kafka: c, Concurrency: 4},
		"partition concurrency": {Group: "g", Kafka: c, PartitionConcurrency: 2},
		"job timeout":           {Group: "g", Kafka: c, JobTimeout: time.Second},
		"stop grace":            {Group: "g", Kafka: c, StopGrace: time.Second},
		"conn max idle time":    {Group: "g", Kafka: c, ConnMaxIdleTime: time.Second},
		"queue settings":        {Group: "g", Kafka: c, Queue: queue.ProcessorConfig{PollInterval: time.Second}},
	} {
		if _, err := worker.New(pgtest.DBOn(t, pool), cfg); !errors.Is(err, worker.ErrInvalidConfig) {
			t.Errorf("%s: %v; want ErrInvalidConfig", name, err)
		}
	}
	// The control: the consumer's own count, or none, is accepted.
	for _, n := range []int{0, c.Partitions()} {
		w, err := worker.New(pgtest.DBOn(t, pool), worker.Config{Group: "g", Kafka: c, Partitions: n})
		if err != nil {
			t.Errorf("Partitions %d with a consumer of %d: %v", n, c.Partitions(), err)
			continue
		}
		pgtest.Must(t, w.Stop(pgtest.Context(t)))
	}
}
