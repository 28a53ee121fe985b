package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/outbox"
	"github.com/leasehold/leasehold/queue"
)

// Emit is the test's job: its handler appends Records to the outbox.
type Emit struct {
	Values []string `json:"values"`
	// Savepoint: the values at these indexes are appended in a savepoint
	// that is rolled back.
	Savepoint []int `json:"savepoint,omitempty"`
	Fail      bool  `json:"fail,omitempty"`
}

func (Emit) Kind() string { return "emit" }

// stored is an outbox row as stored, in the relay's order.
type stored struct {
	seq     int64
	records int
	token   int64
	topic   string
	key     string
	value   string
	headers []byte
}

func outboxRows(ctx context.Context, t *testing.T, db *leasehold.DB) []stored {
	t.Helper()
	schema := pgx.Identifier{db.Schema()}.Sanitize()
	rows, err := db.Pool().Query(ctx, `SELECT s.seq, s.records, s.token, coalesce(r.topic, ''), coalesce(r.key, ''), coalesce(r.value, ''), r.headers
		FROM `+schema+`.outbox_segments s LEFT JOIN `+schema+`.outbox_records r USING (group_name, partition, scope)
		ORDER BY s.group_name, s.partition, s.seq, r.id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stored, error) {
		var s stored
		var key, value []byte
		err := r.Scan(&s.seq, &s.records, &s.token, &s.topic, &key, &value, &s.headers)
		s.key, s.value = string(key), string(value)
		return s, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func setup(t *testing.T) (context.Context, *leasehold.DB, *leaseholdtest.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	db := leaseholdtest.DB(t, leaseholdtest.Pool(t))
	leaseholdtest.Group(ctx, t, db, "g", 4)
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Emit]) error {
		for i, v := range w.Args.Values {
			rec := outbox.Record{Topic: "out", Key: []byte(w.Key), Value: []byte(v),
				Headers: []outbox.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}}
			if !contains(w.Args.Savepoint, i) {
				if err := outbox.Add(ctx, tx, rec); err != nil {
					return err
				}
				continue
			}
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := outbox.Add(ctx, sp, rec); err != nil {
				return err
			}
			if err := sp.Rollback(ctx); err != nil {
				return err
			}
		}
		if w.Args.Fail {
			return errors.New("handler failed")
		}
		return nil
	})
	return ctx, db, leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Records appended in a HandleTx handler commit with its job, as one
// segment carrying the grant's token, in the order appended, with their
// key and headers; each job's commit is the next segment.
func TestRecordsCommitWithTheJobAsOneSegment(t *testing.T) {
	t.Parallel()
	ctx, db, w := setup(t)
	for _, vs := range [][]string{{"a", "b"}, {"c"}} {
		res, err := w.Work(ctx, t, queue.Job{Group: "g", Key: "k", Args: Emit{Values: vs}})
		if err != nil || res.Outcome != queue.OutcomeCompleted {
			t.Fatalf("job: %v %v", res, err)
		}
	}
	got := outboxRows(ctx, t, db)
	if len(got) != 3 {
		t.Fatalf("outbox rows %+v, want 3", got)
	}
	for i, want := range []struct {
		seq   int64
		value string
	}{{1, "a"}, {1, "b"}, {2, "c"}} {
		g := got[i]
		if g.seq != want.seq || g.value != want.value || g.key != "k" || g.topic != "out" || g.token <= 0 {
			t.Errorf("row %d = %+v, want segment %d value %q key k token > 0", i, g, want.seq, want.value)
		}
	}
	if got[0].records != 2 || got[2].records != 1 {
		t.Errorf("segment record counts %d, %d; want 2, 1", got[0].records, got[2].records)
	}
	if !bytes.Contains(got[1].headers, []byte("i")) || !bytes.Contains(got[1].headers, []byte("1")) {
		t.Errorf("headers of the second record not stored: %q", got[1].headers)
	}
}

// A handler that fails rolls its records back with its effects: no
// segment, and the next commit takes the number the failed one did not.
func TestRecordsRollBackWithAFailedHandler(t *testing.T) {
	t.Parallel()
	ctx, db, w := setup(t)
	res, err := w.Work(ctx, t, queue.Job{Group: "g", Key: "k", Args: Emit{Values: []string{"lost"}, Fail: true}})
	if err == nil || res.Outcome == queue.OutcomeCompleted {
		t.Fatalf("the failing job: %+v %v", res, err)
	}
	if got := outboxRows(ctx, t, db); len(got) != 0 {
		t.Fatalf("a failed handler's records were kept: %+v", got)
	}
	if _, err := w.Work(ctx, t, queue.Job{Group: "g", Key: "k2", Args: Emit{Values: []string{"kept"}}}); err != nil {
		t.Fatal(err)
	}
	if got := outboxRows(ctx, t, db); len(got) != 1 || got[0].value != "kept" || got[0].seq != 1 {
		t.Fatalf("after a rolled back segment: %+v, want segment 1 with \"kept\" (numbers without gaps)", got)
	}
}

// Records appended in a savepoint that is rolled back are not published;
// the others of the transaction are, in order.
func TestRecordsOfARolledBackSavepointAreDropped(t *testing.T) {
	t.Parallel()
	ctx, db, w := setup(t)
	res, err := w.Work(ctx, t, queue.Job{Group: "g", Key: "k", Args: Emit{Values: []string{"a", "b", "c"}, Savepoint: []int{1}}})
	if err != nil || res.Outcome != queue.OutcomeCompleted {
		t.Fatalf("job: %v %v", res, err)
	}
	var values []string
	for _, r := range outboxRows(ctx, t, db) {
		values = append(values, r.value)
	}
	if strings.Join(values, ",") != "a,c" {
		t.Fatalf("values %v, want [a c]", values)
	}
}

// Add refuses without a fenced handler's context, with another
// transaction, and records that cannot be published; nothing is appended.
func TestAddRefuses(t *testing.T) {
	t.Parallel()
	ctx, db, _ := setup(t)
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := outbox.Add(ctx, tx, outbox.Record{Topic: "out"}); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("Add outside a handler = %v, want ErrNoTransaction", err)
	}

	var errs []error
	ws := queue.NewWorkers()
	queue.HandleTx(ws, func(ctx context.Context, tx pgx.Tx, w *queue.Work[Emit]) error {
		other, err := db.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer other.Rollback(ctx)
		errs = append(errs,
			outbox.Add(ctx, other, outbox.Record{Topic: "out"}),
			outbox.Add(ctx, tx, outbox.Record{Topic: "out"}, outbox.Record{Topic: "no spaces"}),
			outbox.Add(ctx, tx, outbox.Record{Topic: ""}),
			outbox.Add(ctx, tx, outbox.Record{Topic: "out", Value: make([]byte, outbox.MaxRecordBytes+1)}),
		)
		return nil
	})
	w := leaseholdtest.NewWorker(t, db, queue.ProcessorConfig{Workers: ws})
	if _, err := w.Work(ctx, t, queue.Job{Group: "g", Args: Emit{}}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], outbox.ErrNoTransaction) {
		t.Errorf("Add with another transaction = %v, want ErrNoTransaction", errs[0])
	}
	for i, err := range errs[1:] {
		var re *outbox.RecordError
		if !errors.As(err, &re) || !errors.Is(err, outbox.ErrInvalidRecord) {
			t.Errorf("invalid record %d: %v, want a *RecordError", i, err)
		}
	}
	var re *outbox.RecordError
	if errors.As(errs[1], &re) && re.Index != 1 {
		t.Errorf("RecordError.Index = %d, want 1", re.Index)
	}
	if got := outboxRows(ctx, t, db); len(got) != 0 {
		t.Fatalf("refused records were appended: %+v", got)
	}
}

// Two appending jobs run inline in one test transaction (WorkTx) each seal
// a segment of their own (records are stamped per handler run, not per
// transaction).
func TestTwoInlineJobsInOneTransactionEachSealASegment(t *testing.T) {
	t.Parallel()
	ctx, db, w := setup(t)
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for i, vs := range [][]string{{"a"}, {"b"}} {
		res, err := w.WorkTx(ctx, t, tx, queue.Job{Group: "g", Key: "k", Args: Emit{Values: vs}})
		if err != nil || res.Outcome != queue.OutcomeCompleted {
			t.Fatalf("job %d: outcome %v, %v", i, res.Outcome, err)
		}
	}
	var segments int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{db.Schema()}.Sanitize()+`.outbox_segments`).Scan(&segments); err != nil {
		t.Fatal(err)
	}
	if segments != 2 {
		t.Fatalf("%d segments, want 2", segments)
	}
}
