package outbox_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/queue"
)

// Deposit is a job whose handler credits an account and announces the new
// balance on Kafka.
type Deposit struct {
	Account string `json:"account"`
	Cents   int64  `json:"cents"`
}

func (Deposit) Kind() string { return "deposit" }

// A transactional handler writes its effect and appends the record to
// publish in the same fenced transaction: both commit with the job, or
// neither does. A worker's kafka.Relay then publishes the record exactly
// once (here the job runs inline, as in a test, and the outbox is read
// back instead).
func ExampleAdd() {
	t := &exampleTB{}
	defer t.cleanup()
	ctx := context.Background()
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "payments", 4)
	schema := pgx.Identifier{db.Schema()}.Sanitize() // the test's throwaway schema
	if _, err := db.Pool().Exec(ctx, `CREATE TABLE `+schema+`.balances (account text PRIMARY KEY, cents bigint NOT NULL)`); err != nil {
		t.Fatalf("%v", err)
	}

	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Deposit]) error {
		var total int64
		err := tx.QueryRow(ctx, `INSERT INTO `+schema+`.balances AS b VALUES ($1, $2)
			ON CONFLICT (account) DO UPDATE SET cents = b.cents + $2 RETURNING cents`,
			w.Args.Account, w.Args.Cents).Scan(&total)
		if err != nil {
			return err
		}
		return outbox.Add(ctx, tx, outbox.Record{
			Topic: "balances",
			Key:   []byte(w.Args.Account),
			Value: fmt.Appendf(nil, `{"cents":%d}`, total),
		})
	})
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	for _, cents := range []int64{500, 250} {
		res, err := w.Work(ctx, t, queue.Job{Group: "payments", Key: "acct-1", Args: Deposit{"acct-1", cents}})
		fmt.Println("job:", res.Outcome, err)
	}

	// What the relay would publish, in order: one segment per commit.
	rows, err := db.Pool().Query(ctx, `SELECT s.seq, r.topic, r.key, r.value
		FROM `+schema+`.outbox_segments s JOIN `+schema+`.outbox_records r USING (group_name, partition, scope)
		ORDER BY s.seq, r.id`)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for rows.Next() {
		var seq int64
		var topic string
		var key, value []byte
		if err := rows.Scan(&seq, &topic, &key, &value); err != nil {
			t.Fatalf("%v", err)
		}
		fmt.Printf("segment %d: %s %s %s\n", seq, topic, key, value)
	}
	// Output:
	// job: completed <nil>
	// job: completed <nil>
	// segment 1: balances acct-1 {"cents":500}
	// segment 2: balances acct-1 {"cents":750}
}

// exampleTB is the little of testing.TB the helpers use, for an Example.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (*exampleTB) Helper()                           {}
func (t *exampleTB) Cleanup(f func())                { t.cleanups = append(t.cleanups, f) }
func (*exampleTB) Logf(format string, args ...any)   { fmt.Printf(format+"\n", args...) }
func (*exampleTB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleTB) cleanup() {
	for _, f := range slices.Backward(t.cleanups) {
		f()
	}
}
