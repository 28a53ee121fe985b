package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"sync"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (email) Kind() string { return "email" }

// unencodable has a field encoding/json refuses.
type unencodable struct{ C chan int }

func (unencodable) Kind() string { return "broken" }

type kindless struct{}

func (kindless) Kind() string { return "" }

// setup returns a pool with the group "emails" of 8 partitions, and a Client.
func setup(t *testing.T) (*pgxpool.Pool, *queue.Client) {
	pool := pgtest.Pool(t)
	_, err := pool.Exec(pgtest.Context(t), `INSERT INTO leasehold.groups (name, partitions) VALUES ('emails', 8)`)
	pgtest.Must(t, err)
	c, err := queue.New(pgtest.DBOn(t, pool), queue.Config{})
	pgtest.Must(t, err)
	return pool, c
}

func jobCount(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	pgtest.Must(t, pool.QueryRow(pgtest.Context(t), `SELECT count(*) FROM leasehold.jobs`).Scan(&n))
	return n
}

func TestEnqueueOne(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	res, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "customer-42", Args: email{To: "a@example.com", Subject: "hi"}})
	pgtest.Must(t, err)
	if res.ID <= 0 || res.Duplicate || res.Partition != partition.OfString("customer-42", 8) {
		t.Fatalf("Enqueue = %+v; want a new id in partition %d", res, partition.OfString("customer-42", 8))
	}
	var kind, to, state string
	var part, maxAttempts int
	var due bool
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT kind, args->>'to', state, partition, max_attempts, run_at <= clock_timestamp()
		FROM leasehold.jobs WHERE id = $1`, res.ID).Scan(&kind, &to, &state, &part, &maxAttempts, &due))
	if kind != "email" || to != "a@example.com" || state != "pending" || part != res.Partition || maxAttempts != 25 || !due {
		t.Fatalf("row = %s %s %s %d %d due=%v", kind, to, state, part, maxAttempts, due)
	}
	later := time.Now().Add(time.Hour)
	res, err = c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: email{}, RunAt: later, MaxAttempts: 3})
	pgtest.Must(t, err)
	var runAt time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT run_at, max_attempts FROM leasehold.jobs WHERE id = $1`, res.ID).Scan(&runAt, &maxAttempts))
	if runAt.Sub(later).Abs() > time.Millisecond || maxAttempts != 3 {
		t.Fatalf("run_at %v max_attempts %d; want %v and 3", runAt, maxAttempts, later)
	}
}

func TestEnqueueManyInOneStatement(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	jobs := make([]queue.Job, 1000)
	for i := range jobs {
		jobs[i] = queue.Job{Group: "emails", Key: fmt.Sprintf("customer-%d", i%37), Args: email{To: fmt.Sprint(i)}}
	}
	res, err := c.EnqueueMany(ctx, jobs...)
	pgtest.Must(t, err)
	seen := map[int64]bool{}
	for i, r := range res {
		if r.ID <= 0 || seen[r.ID] || r.Partition != partition.OfString(jobs[i].Key, 8) {
			t.Fatalf("job %d: %+v", i, r)
		}
		seen[r.ID] = true
		var to string
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT args->>'to' FROM leasehold.jobs WHERE id = $1`, r.ID).Scan(&to))
		if to != fmt.Sprint(i) {
			t.Fatalf("job %d got id %d, whose args are job %s's", i, r.ID, to)
		}
	}
	// Ids follow the input order, so jobs of one key keep their order.
	for i := 1; i < len(res); i++ {
		if res[i].ID <= res[i-1].ID {
			t.Fatalf("ids out of input order at %d", i)
		}
	}
}

func TestUniqueKeyMakesASecondEnqueueANoOpWhilePending(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	job := queue.Job{Group: "emails", Key: "k", Args: email{}, UniqueKey: "welcome:42"}
	first, err := c.Enqueue(ctx, job)
	pgtest.Must(t, err)
	again, err := c.Enqueue(ctx, job)
	pgtest.Must(t, err)
	if first.Duplicate || !again.Duplicate || again.ID != 0 {
		t.Fatalf("first %+v, again %+v; want the second to be a duplicate", first, again)
	}
	batch, err := c.EnqueueMany(ctx,
		queue.Job{Group: "emails", Key: "k", Args: email{}, UniqueKey: "u:1"},
		queue.Job{Group: "emails", Key: "k", Args: email{}},
		queue.Job{Group: "emails", Key: "k", Args: email{}, UniqueKey: "u:1"},
		queue.Job{Group: "emails", Key: "k", Args: email{}, UniqueKey: "welcome:42"},
		queue.Job{Group: "emails", Key: "k", Args: email{}, UniqueKey: "u:2"})
	pgtest.Must(t, err)
	var dup []bool
	for _, r := range batch {
		dup = append(dup, r.Duplicate)
	}
	if fmt.Sprint(dup) != "[false false true true false]" || batch[1].ID == 0 || batch[4].ID == 0 {
		t.Fatalf("batch = %+v; want duplicates at 2 and 3 only", batch)
	}
	// Once the first job is finished, the key is free again.
	_, err = pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed', finished_at = clock_timestamp() WHERE id = $1`, first.ID)
	pgtest.Must(t, err)
	if r, err := c.Enqueue(ctx, job); err != nil || r.Duplicate {
		t.Fatalf("enqueue after the first finished = %+v, %v; want a new job", r, err)
	}
	if n := jobCount(t, pool); n != 5 {
		t.Fatalf("%d jobs; want 5", n)
	}
}

func TestEnqueueTxCommitsOrRollsBackWithTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.Background()) // on failure: the pool cannot close while tx holds a connection
	_, err = c.EnqueueTx(ctx, tx, queue.Job{Group: "emails", Key: "k", Args: email{}})
	pgtest.Must(t, err)
	pgtest.Must(t, tx.Rollback(ctx))
	if n := jobCount(t, pool); n != 0 {
		t.Fatalf("%d jobs after rollback; want 0", n)
	}
	tx, err = pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(context.Background()) // on failure: the pool cannot close while tx holds a connection
	_, err = c.EnqueueTx(ctx, tx, queue.Job{Group: "emails", Key: "k", Args: email{}})
	pgtest.Must(t, err)
	if n := jobCount(t, pool); n != 0 {
		t.Fatal("job visible before commit")
	}
	pgtest.Must(t, tx.Commit(ctx))
	if n := jobCount(t, pool); n != 1 {
		t.Fatalf("%d jobs after commit; want 1", n)
	}
}

func TestBadJobsAreRefusedAndNothingIsEnqueued(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	good := queue.Job{Group: "emails", Key: "k", Args: email{}}
	for _, tc := range []struct {
		job   queue.Job
		field string
	}{
		{queue.Job{Key: "k", Args: email{}}, "Group"},
		{queue.Job{Group: "emails", Key: strings.Repeat("k", 256), Args: email{}}, "Key"},
		{queue.Job{Group: "emails", Key: "bad\xff", Args: email{}}, "Key"},
		{queue.Job{Group: "emails", Key: "k"}, "Args"},
		{queue.Job{Group: "emails", Key: "k", Args: kindless{}}, "Kind"},
		{queue.Job{Group: "emails", Key: "k", Args: unencodable{}}, "Args"},
		{queue.Job{Group: "emails", Key: "k", Args: email{}, MaxAttempts: -1}, "MaxAttempts"},
		{queue.Job{Group: "emails", Key: "k", Args: email{}, UniqueKey: strings.Repeat("u", 256)}, "UniqueKey"},
	} {
		_, err := c.EnqueueMany(ctx, good, tc.job)
		var je *queue.JobError
		if !errors.Is(err, queue.ErrInvalidJob) || !errors.As(err, &je) || je.Field != tc.field {
			t.Errorf("job %+v: %v; want *JobError for %s", tc.job, err, tc.field)
			continue
		}
		if tc.field != "Group" && je.Index != 1 {
			t.Errorf("job %+v: error at index %d; want 1", tc.job, je.Index)
		}
	}
	if _, err := c.EnqueueMany(ctx, good, queue.Job{Group: "nope", Key: "k", Args: email{}}); !errors.Is(err, queue.ErrUnknownGroup) {
		t.Fatalf("unknown group: %v; want ErrUnknownGroup", err)
	}
	if n := jobCount(t, pool); n != 0 {
		t.Fatalf("%d jobs enqueued by refused calls; want 0", n)
	}
	if _, err := queue.New(pgtest.DBOn(t, pool), queue.Config{MaxAttempts: -1}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Fatalf("New with MaxAttempts -1 = %v; want ErrInvalidConfig", err)
	}
	if _, err := queue.New(nil, queue.Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Fatalf("New(nil) = %v; want ErrInvalidConfig", err)
	}
}

// The result mapping must give each input its own id. A BEFORE trigger
// holds the second row while the pending job holding the unique key is
// finished: the statement then skips input 0 and inserts input 1.
func TestEnqueueMappingSurvivesAUniqueKeyFreedMidStatement(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	_, err := pool.Exec(ctx, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.args->>'to' = 'second' THEN PERFORM pg_sleep(1); END IF; RETURN NEW; END $$;
		CREATE TRIGGER slow BEFORE INSERT ON leasehold.jobs FOR EACH ROW EXECUTE FUNCTION slow()`)
	pgtest.Must(t, err)
	holder, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: email{To: "holder"}, UniqueKey: "u"})
	pgtest.Must(t, err)
	var res []queue.Enqueued
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err = c.EnqueueMany(ctx,
			queue.Job{Group: "emails", Key: "k", Args: email{To: "first"}, UniqueKey: "u"},
			queue.Job{Group: "emails", Key: "k", Args: email{To: "second"}, UniqueKey: "u"})
	}()
	time.Sleep(300 * time.Millisecond)
	_, err2 := pool.Exec(ctx, `UPDATE leasehold.jobs SET state = 'completed', finished_at = clock_timestamp() WHERE id = $1`, holder.ID)
	pgtest.Must(t, err2)
	wg.Wait()
	pgtest.Must(t, err)
	for i, want := range []string{"first", "second"} {
		if res[i].Duplicate {
			continue
		}
		var to string
		pgtest.Must(t, pool.QueryRow(ctx, `SELECT args->>'to' FROM leasehold.jobs WHERE id = $1`, res[i].ID).Scan(&to))
		if to != want {
			t.Errorf("input %d (%s) got id %d, whose args are %q's", i, want, res[i].ID, to)
		}
	}
}
