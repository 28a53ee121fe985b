package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
)

// Workload is the work a run gives its fleet: items fed in by the
// orchestrator, applied by the workers, each application leaving one ledger
// row. Four are built in: "queue" (jobs whose transactional handler
// appends to the ledger), "kafka" (a topic of an in-process Kafka, kfake,
// consumed with kafka into a ledger), "kafka-out" (the same, plus one
// output record per input record through the fenced outbox, published by
// kafka.Relay into an output topic) and "batch" (the items of one queue
// batch, applied as the queue's jobs, and its follow-ups). All are checked
// by Check.
// WorkloadNamed returns a new instance per call: the orchestrator's side
// may keep state (the Kafka cluster) from Setup to Close.
type Workload interface {
	// Name names the workload (the --workload flag).
	Name() string
	// Setup creates the workload's tables and whatever else it needs (the
	// Kafka workload starts its cluster and fills in env.Brokers), before
	// any worker starts. (The batch workload creates its batch in Feed:
	// a batch needs workers that handle its follow-ups' kinds.)
	Setup(ctx context.Context, db *pgxpool.Pool, env *Env) error
	// Feed produces n items spread evenly over d, retrying through faults
	// until ctx ends, and returns the ids whose production was acknowledged.
	Feed(ctx context.Context, db *pgxpool.Pool, env Env, n int, d time.Duration) ([]int64, error)
	// Outstanding returns how many items are not finished yet.
	Outstanding(ctx context.Context, db *pgxpool.Pool, env Env) (int, error)
	// Items returns how many items were produced (jobs enqueued, records
	// in the topic's log).
	Items(ctx context.Context, db *pgxpool.Pool, env Env) (int, error)
	// Applied returns the number of ledger rows.
	Applied(ctx context.Context, db *pgxpool.Pool, env Env) (int64, error)
	// Collect reads the items, the ledger and (Kafka) the stored offsets
	// after the run: the Input fields Jobs, Ledger and Offsets.
	Collect(ctx context.Context, db *pgxpool.Pool, env Env) (Input, error)
	// Work runs a worker process's side until ctx ends, then stops
	// gracefully.
	Work(ctx context.Context, db *pgxpool.Pool, w WorkerEnv) error
	// Close releases what Setup started.
	Close() error
}

// Env is what the orchestrator and the workers agree on.
type Env struct {
	// Schema holds leasehold's tables and the workload's.
	Schema string
	// Group is the partition group.
	Group string
	// Partitions is the group's partition count.
	Partitions int
	// Keys is how many distinct keys the items are spread over (the queue
	// and batch workloads' job keys; a Kafka record's key is its
	// partition).
	Keys int
	// Brokers are the Kafka workload's seed brokers (host:port), set by its
	// Setup; empty for the queue workload.
	Brokers []string
	// NoPlain makes the queue workload's jobs all transactional: no key
	// gets plain jobs (plainKey). The demo sets it: its story promises
	// every effect exactly once, which a plain handler's is not.
	NoPlain bool
}

// WorkerEnv is a worker process's side of a run.
type WorkerEnv struct {
	Env
	// ID is the worker's member id (one per process incarnation).
	ID string
	// Lease configures the partition leases: TTL, the skewable Clock and
	// the Hooks recording grants, losses and releases.
	Lease lease.Config
	// Recorder receives the worker's history.
	Recorder *Recorder
	// Stall reports whether the current handler run should stall, and for
	// how long: past the lease TTL, ignoring its context.
	Stall func() (bool, time.Duration)
	// Unfenced applies effects outside the fenced transaction (the
	// control; kafka-out: publishes the outbox with the control's unsafe
	// relay instead).
	Unfenced bool
	// RelayKill, if set, is asked after each Kafka commit of a kafka-out
	// relay, once per record published, whether the process kills itself
	// there (SIGKILL), before anything after the commit.
	RelayKill func() bool
	// RelayPause, if set, is asked after each record a kafka-out relay
	// produced in a Kafka transaction whether the process stops itself
	// there (SIGSTOP), and for how long; it asks the orchestrator to
	// resume it through PauseFile.
	RelayPause func() (bool, time.Duration)
	// PauseFile is the file of RelayPause.
	PauseFile string
	// TransactionPooling: the pool goes through PgBouncer in transaction
	// mode (leasehold.Config.TransactionPooling; no LISTEN: the worker
	// polls).
	TransactionPooling bool
	// Hold, if set, is called by each handler run after it wrote its
	// effect and before it returns (so before its transaction commits):
	// an in-process Member's Gate.
	Hold func(HandlerRun)
	// Logger receives the worker's logs.
	Logger *slog.Logger
}

// Workloads lists the known workloads' names.
var Workloads = []string{"queue", "kafka", "kafka-out", "batch"}

// WorkloadNamed returns a new instance of the workload called name.
func WorkloadNamed(name string) (Workload, error) {
	switch name {
	case "queue":
		return queueWorkload{}, nil
	case "kafka":
		return &kafkaWorkload{}, nil
	case "kafka-out":
		return &kafkaOutWorkload{}, nil
	case "batch":
		return &batchWorkload{}, nil
	}
	return nil, fmt.Errorf("%w: unknown workload %q (known: %s)", ErrInvalidConfig, name, strings.Join(Workloads, ", "))
}

// newChance returns a seeded coin that comes up true with probability p
// (nil for p <= 0): the same seed and name give the same sequence.
func newChance(seed int64, name string, p float64) func() bool {
	if p <= 0 {
		return nil
	}
	s := newStaller(seed, name, p, 0)
	return func() bool { ok, _ := s.next(); return ok }
}

// staller decides which handler runs stall, from a seeded source.
type staller struct {
	mu  sync.Mutex
	r   *rand.Rand
	p   float64
	ttl time.Duration
}

func newStaller(seed int64, id string, p float64, ttl time.Duration) *staller {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(id) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return &staller{r: rand.New(rand.NewPCG(uint64(seed), h)), p: p, ttl: ttl}
}

// next reports whether to stall, and for 1.5 to 2.5 TTLs.
func (s *staller) next() (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p <= 0 || s.r.Float64() >= s.p {
		return false, 0
	}
	return true, time.Duration((1.5 + s.r.Float64()) * float64(s.ttl))
}
