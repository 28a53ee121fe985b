package worker_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// deposit is a job appending one row to the ledger.
type deposit struct {
	Seq int `json:"seq"`
}

func (deposit) Kind() string { return "deposit" }

func ledgerSetup(t *testing.T, pool *pgxpool.Pool) {
	_, err := pool.Exec(pgtest.Context(t), `CREATE TABLE ledger (
		n bigserial PRIMARY KEY, job_id bigint NOT NULL, key text NOT NULL, seq int NOT NULL,
		partition int NOT NULL, token bigint NOT NULL, worker text NOT NULL)`)
	pgtest.Must(t, err)
}

// record is a transactional handler appending the job to the ledger.
func record(name string) func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
	return func(ctx context.Context, tx pgx.Tx, w *queue.Work[deposit]) error {
		_, err := tx.Exec(ctx, `INSERT INTO ledger (job_id, key, seq, partition, token, worker) VALUES ($1, $2, $3, $4, $5, $6)`,
			w.ID, w.Key, w.Args.Seq, w.Partition, int64(w.Token), name)
		return err
	}
}

// start starts a worker of group "g" (of 8 partitions and a 50ms poll,
// unless it runs a Kafka consumer); it is stopped when the test ends.
func start(t *testing.T, pool *pgxpool.Pool, cfg worker.Config) *worker.Worker {
	t.Helper()
	return startOn(t, pgtest.DBOn(t, pool), cfg)
}

// startOn is start on db.
func startOn(t *testing.T, db *leasehold.DB, cfg worker.Config) *worker.Worker {
	t.Helper()
	if cfg.Group == "" {
		cfg.Group = "g"
	}
	if cfg.Partitions == 0 && cfg.Kafka == nil {
		cfg.Partitions = 8
	}
	if cfg.Lease.TTL == 0 {
		cfg.Lease.TTL = 2 * time.Second
	}
	if cfg.Queue.PollInterval == 0 && cfg.Kafka == nil {
		cfg.Queue.PollInterval = 50 * time.Millisecond
	}
	cfg.MembershipPollInterval = 200 * time.Millisecond
	w, err := worker.New(db, cfg)
	pgtest.Must(t, err)
	pgtest.Must(t, w.Start(pgtest.Context(t)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w
}

// entry is one ledger row.
type entry struct {
	n          int64
	job        int64
	key        string
	seq, part  int
	token      int64
	workerName string
}

func readLedger(t *testing.T, pool *pgxpool.Pool) []entry {
	rows, err := pool.Query(pgtest.Context(t), `SELECT n, job_id, key, seq, partition, token, worker FROM ledger ORDER BY n`)
	pgtest.Must(t, err)
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entry, error) {
		var e entry
		return e, r.Scan(&e.n, &e.job, &e.key, &e.seq, &e.part, &e.token, &e.workerName)
	})
	pgtest.Must(t, err)
	return es
}

// checkLedger checks the ledger against the enqueued jobs (id -> key, seq):
// every job applied exactly once, each key's jobs in seq order, and each
// partition's tokens never decreasing in ledger order (a write under an
// older grant after a newer grant wrote is a stale write).
func checkLedger(jobs map[int64]deposit, keys map[int64]string, ledger []entry) []string {
	var bad []string
	count := map[int64]int{}
	lastSeq := map[string]int{}
	lastToken := map[int]int64{}
	for _, e := range ledger {
		count[e.job]++
		if d, ok := jobs[e.job]; !ok || d.Seq != e.seq || keys[e.job] != e.key {
			bad = append(bad, fmt.Sprintf("ledger row %d: job %d is not an enqueued job with that key and seq", e.n, e.job))
		}
		if s, ok := lastSeq[e.key]; ok && e.seq <= s {
			bad = append(bad, fmt.Sprintf("ledger row %d: key %s seq %d after seq %d", e.n, e.key, e.seq, s))
		}
		lastSeq[e.key] = e.seq
		if e.token < lastToken[e.part] {
			bad = append(bad, fmt.Sprintf("ledger row %d: partition %d token %d after token %d (stale write)", e.n, e.part, e.token, lastToken[e.part]))
		}
		lastToken[e.part] = max(lastToken[e.part], e.token)
	}
	var ids []int64
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if count[id] != 1 {
			bad = append(bad, fmt.Sprintf("job %d applied %d times", id, count[id]))
		}
	}
	return bad
}

// enqueueDeposits enqueues seqs jobs for each of keys keys, in seq order,
// and returns them by id.
func enqueueDeposits(t *testing.T, pool *pgxpool.Pool, keys, seqs int) (map[int64]deposit, map[int64]string) {
	return enqueueSeqs(t, pool, keys, 0, seqs)
}

// enqueueSeqs enqueues seqs from..to-1 for each of keys keys.
func enqueueSeqs(t *testing.T, pool *pgxpool.Pool, keys, from, to int) (map[int64]deposit, map[int64]string) {
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	var jobs []queue.Job
	for s := from; s < to; s++ {
		for k := range keys {
			jobs = append(jobs, queue.Job{Group: "g", Key: fmt.Sprint("acct-", k), Args: deposit{s}})
		}
	}
	res, err := c.EnqueueMany(pgtest.Context(t), jobs...)
	pgtest.Must(t, err)
	byID, keyOf := map[int64]deposit{}, map[int64]string{}
	for i, r := range res {
		byID[r.ID], keyOf[r.ID] = jobs[i].Args.(deposit), jobs[i].Key
	}
	return byID, keyOf
}

// group creates group "g" with n partitions, so jobs can be enqueued before
// any worker starts.
func group(t *testing.T, pool *pgxpool.Pool, n int) {
	_, err := pool.Exec(pgtest.Context(t), `INSERT INTO leasehold.groups (name, partitions) VALUES ('g', $1)`, n)
	pgtest.Must(t, err)
}

func leaseTTL(d time.Duration) lease.Config { return lease.Config{TTL: d} }
