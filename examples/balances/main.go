// Balances is an idempotent batch job over a table: recompute every
// account's balance from its ledger entries. Each account's update is a
// fenced conditional write (fence.Table) inside the job's transaction, so a
// worker that paused past its lease cannot overwrite a balance written
// under a newer token, and running the batch again changes nothing.
//
//	go run ./examples/balances
package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/internal/exampledb"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

func main() {
	exampledb.Main(func(ctx context.Context, db *leasehold.DB, out io.Writer) error {
		return run(ctx, db, out, 1000)
	})
}

// Recompute is a job: recompute one account's balance.
type Recompute struct {
	Account int64 `json:"account"`
}

// Kind implements queue.Args.
func (Recompute) Kind() string { return "recompute_balance" }

// accounts is the target table: fence_token holds the highest token that
// wrote each row.
var accounts = fence.Table{Name: "accounts", KeyColumn: "id", TokenColumn: "fence_token"}

// recompute writes the balance under the partition's token, in the job's
// transaction: the write, the job's completion and the lease check commit
// together or not at all.
func recompute(ctx context.Context, tx pgx.Tx, w *queue.Work[Recompute]) error {
	return accounts.Update(ctx, tx, w.Args.Account, w.Token,
		`balance = (SELECT coalesce(sum(amount), 0) FROM entries WHERE account_id = $3)`, w.Args.Account)
}

const schema = `
DROP TABLE IF EXISTS entries, accounts;
CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence_token bigint NOT NULL DEFAULT 0);
CREATE TABLE entries (account_id bigint NOT NULL REFERENCES accounts, amount bigint NOT NULL);
`

func run(ctx context.Context, db *leasehold.DB, out io.Writer, n int) error {
	pool := db.Pool()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO accounts (id) SELECT generate_series(1, $1);
		`, n); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `
		INSERT INTO entries SELECT a, (a * 7 + k) % 100 - 20 FROM generate_series(1, $1) a, generate_series(1, 5) k`, n); err != nil {
		return err
	}

	// Two workers share the batch: each account belongs to one partition,
	// and each partition to one worker at a time.
	ws := queue.NewWorkers()
	queue.HandleTx(ws, recompute)
	for i := range 2 {
		w, err := worker.New(db, worker.Config{Group: "balances", ID: "worker-" + strconv.Itoa(i),
			Workers: ws, Partitions: 16})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		defer w.Stop(context.WithoutCancel(ctx))
	}
	client, err := queue.New(db, queue.Config{})
	if err != nil {
		return err
	}
	for pass := 1; pass <= 2; pass++ { // the second pass shows the job is idempotent
		jobs := make([]queue.Job, n)
		for i := range jobs {
			id := int64(i + 1)
			jobs[i] = queue.Job{Group: "balances", Key: strconv.FormatInt(id, 10), Args: Recompute{id}}
		}
		if _, err := client.EnqueueMany(ctx, jobs...); err != nil {
			return err
		}
		if err := waitDone(ctx, pool); err != nil {
			return err
		}
		var total, want, wrong int64
		if err := pool.QueryRow(ctx, `
			SELECT (SELECT sum(balance) FROM accounts), (SELECT sum(amount) FROM entries),
			       (SELECT count(*) FROM accounts a
			        WHERE balance <> (SELECT coalesce(sum(amount), 0) FROM entries e WHERE e.account_id = a.id))`,
		).Scan(&total, &want, &wrong); err != nil {
			return err
		}
		fmt.Fprintf(out, "pass %d: %d accounts recomputed; total balance %d (entries sum to %d); %d wrong\n",
			pass, n, total, want, wrong)
	}
	return nil
}

// waitDone waits until the group has no pending job.
func waitDone(ctx context.Context, pool *pgxpool.Pool) error {
	for {
		var pending int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM leasehold.jobs WHERE group_name = 'balances' AND state = 'pending'`).Scan(&pending); err != nil {
			return err
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
