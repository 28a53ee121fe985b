package kafka_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/worker"
)

// node is a test worker running a Kafka consumer.
type node struct {
	*kafka.Consumer
	w  *worker.Worker
	id string
}

// newNode creates a consumer of cfg and a worker of group running it
// (lease TTL 2s), its logs going to log; nothing is started. cfg.Handler
// defaults to a ledger handler named id.
func newNode(t testing.TB, pool *pgxpool.Pool, group, id string, cfg kafka.Config, log *slog.Logger) *node {
	t.Helper()
	if cfg.Handler == nil {
		cfg.Handler = ledgerHandler(id)
	}
	db := pgtest.Open(t, pool, leasehold.Config{Logger: log})
	c, err := kafka.New(db, cfg)
	pgtest.Must(t, err)
	w, err := worker.New(db, worker.Config{Group: group, ID: id, Kafka: c, Lease: lease.Config{TTL: 2 * time.Second}})
	pgtest.Must(t, err)
	t.Cleanup(func() { // a worker never started, or stopped already: only releases resources
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return &node{Consumer: c, w: w, id: id}
}

// start starts a worker of group running a consumer of cfg; it is stopped
// when the test ends.
func start(t testing.TB, pool *pgxpool.Pool, group, id string, cfg kafka.Config) *node {
	t.Helper()
	return startLog(t, pool, group, id, cfg, testLogger(t))
}

// startLog is start with the worker's logs going to log.
func startLog(t testing.TB, pool *pgxpool.Pool, group, id string, cfg kafka.Config, log *slog.Logger) *node {
	t.Helper()
	n := newNode(t, pool, group, id, cfg, log)
	pgtest.Must(t, n.w.Start(pgtest.ContextFor(t, 30*time.Second)))
	t.Cleanup(func() { stop(t, n) })
	return n
}

// stop stops the node's worker gracefully.
func stop(t testing.TB, n *node) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.w.Stop(ctx); err != nil {
		t.Errorf("Stop %s: %v", n.id, err)
	}
}

func newLedger(t testing.TB) *pgxpool.Pool {
	pool := pgtest.Pool(t)
	_, err := pool.Exec(pgtest.ContextFor(t, time.Minute), ledgerDDL)
	pgtest.Must(t, err)
	return pool
}

// Two workers share a topic; one leaves gracefully mid-stream; every record
// is applied exactly once, in order, and the stored offsets reach the log
// end.
func TestConsumesEveryRecordOnceAcrossAGracefulHandoff(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 8, "t")
	pool := newLedger(t)
	cfg := kafka.Config{Topics: []string{"t"}, Brokers: brokers, PartitionsPerTopic: 8, MaxBatch: 50}
	ca := start(t, pool, "g", "a", cfg)
	start(t, pool, "g", "b", cfg)
	produced := produce(t, brokers, "t", 0, 2000)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 30*time.Second)
	stop(t, ca)
	produced = append(produced, produce(t, brokers, "t", 2000, 2000)...)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 30*time.Second)
	if bad := checkLedger("t", produced, ledger(t, pool)); len(bad) > 0 {
		t.Fatalf("ledger violations: %v", bad)
	}
	if s := ca.Stats(); s.Records == 0 {
		t.Errorf("worker a handled nothing before it left: the handoff was not exercised: %+v", s)
	}
}

// The checker must catch a duplicate, a gap, a reordering and a wrong value.
func TestLedgerCheckerNegativeControls(t *testing.T) {
	produced := []rec{{0, 0, "a"}, {0, 1, "b"}, {0, 3, "c"}, {1, 0, "d"}}
	good := []row{
		{1, "t", 0, 0, "a", 5}, {2, "t", 1, 0, "d", 6}, {3, "t", 0, 1, "b", 5}, {4, "t", 0, 3, "c", 7},
	}
	if bad := checkLedger("t", produced, good); len(bad) != 0 {
		t.Fatalf("a correct ledger was flagged: %v", bad)
	}
	cases := map[string][]row{
		"duplicate": append(append([]row(nil), good...), row{5, "t", 0, 3, "c", 7}),
		"gap":       {good[0], good[1], good[3]},
		"reordered": {good[0], good[1], {3, "t", 0, 3, "c", 7}, {4, "t", 0, 1, "b", 7}},
		"value":     {good[0], good[1], {3, "t", 0, 1, "x", 5}, good[3]},
		"stale":     {good[0], good[1], {3, "t", 0, 1, "b", 4}, good[3]},
	}
	for name, rows := range cases {
		if bad := checkLedger("t", produced, rows); len(bad) == 0 {
			t.Errorf("%s: the checker missed it", name)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	pool := pgtest.Pool(t)
	h := ledgerHandler("x")
	for name, cfg := range map[string]kafka.Config{
		"no topics":  {Brokers: []string{"b:1"}, Handler: h},
		"no handler": {Topics: []string{"t"}, Brokers: []string{"b:1"}},
		"no brokers": {Topics: []string{"t"}, Handler: h},
		"twice":      {Topics: []string{"t", "t"}, Brokers: []string{"b:1"}, Handler: h},
		"too many":   {Topics: []string{"t"}, Brokers: []string{"b:1"}, Handler: h, PartitionsPerTopic: 1 << 20},
		"too many topics": {Topics: []string{"a", "b", "c", "d", "e"}, Brokers: []string{"b:1"}, Handler: h,
			PartitionsPerTopic: kafka.MaxTopicPartitions},
		"negative":       {Topics: []string{"t"}, Brokers: []string{"b:1"}, Handler: h, FetchMaxWait: -1},
		"bad policy":     {Topics: []string{"t"}, Brokers: []string{"b:1"}, Handler: h, OutOfRange: 7},
		"bad start":      {Topics: []string{"t"}, Brokers: []string{"b:1"}, Handler: h, StartAt: 3},
		"retry inverted": {Topics: []string{"t"}, Brokers: []string{"b:1"}, Handler: h, RetryMin: time.Minute, RetryMax: time.Second},
	} {
		t.Setenv(kafka.EnvBrokers, "")
		if _, err := kafka.New(pgtest.DBOn(t, pool), cfg); !errors.Is(err, kafka.ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := kafka.New(nil, kafka.Config{}); !errors.Is(err, kafka.ErrInvalidConfig) {
		t.Errorf("nil pool: got %v", err)
	}
}

func TestBrokersFromEnvironment(t *testing.T) {
	brokers := cluster(t, 2, "t")
	t.Setenv(kafka.EnvBrokers, brokers[0])
	pool := newLedger(t)
	start(t, pool, "g", "env", kafka.Config{Topics: []string{"t"}, PartitionsPerTopic: 2})
	produced := produce(t, brokers, "t", 0, 20)
	waitOffsets(t, pool, "g", "t", logEnds(produced), 30*time.Second)
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	brokers := cluster(t, 4, "t")
	pool := pgtest.Pool(t)
	for name, tc := range map[string]struct {
		cfg  kafka.Config
		want error
	}{
		"missing topic":       {kafka.Config{Topics: []string{"nope"}}, kafka.ErrTopicNotFound},
		"too many partitions": {kafka.Config{Topics: []string{"t"}, PartitionsPerTopic: 2}, kafka.ErrTooManyPartitions},
		"fits":                {kafka.Config{Topics: []string{"t"}, PartitionsPerTopic: 5}, nil},
	} {
		cfg := tc.cfg
		cfg.Brokers = brokers
		n := newNode(t, pool, "g-"+name[:4], "x", cfg, testLogger(t))
		err := n.w.Start(pgtest.ContextFor(t, 20*time.Second))
		if tc.want == nil {
			pgtest.Must(t, err)
			stop(t, n)
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
		if err := n.w.Stop(pgtest.ContextFor(t, 10*time.Second)); err != nil {
			t.Errorf("%s: Stop after a failed Start: %v", name, err)
		}
		if err := n.Ready(); !errors.Is(err, kafka.ErrNotOpen) {
			t.Errorf("%s: the consumer after a failed Start: Ready = %v; want ErrNotOpen (left closed)", name, err)
		}
	}
}

// A broker that cannot be reached fails the worker's Start within its
// context, with the cause, and leaves nothing running.
func TestStartWithoutABroker(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	n := newNode(t, pool, "g", "x", kafka.Config{Topics: []string{"t"}, Brokers: []string{"127.0.0.1:1"}}, testLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	began := time.Now()
	err := n.w.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "read metadata") {
		t.Fatalf("Start = %v, want a metadata error", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("Start took %v past its 2s context", d)
	}
	// Start ran its clean-up under its own context: if that had ended, the
	// clean-up may report it. Every Stop returns what the clean-up reported.
	first := n.w.Stop(pgtest.ContextFor(t, 10*time.Second))
	if first != nil && !errors.Is(first, context.DeadlineExceeded) {
		t.Fatalf("Stop after a failed Start: %v; want nil or Start's context's end", first)
	}
	if err := n.w.Stop(pgtest.ContextFor(t, 10*time.Second)); err != first {
		t.Fatalf("second Stop after a failed Start = %v; want the first one's result %v", err, first)
	}
	t.Logf("Start after %v: %v", time.Since(began).Round(time.Millisecond), err)
}
