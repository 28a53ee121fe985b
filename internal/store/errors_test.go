package store

import (
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/leasehold/leasehold/fence"
)

// The one classifier: what a caller may branch on after a failed statement
// or COMMIT.
func TestClassify(t *testing.T) {
	if Classify("x", "op", "", nil) != nil {
		t.Fatal("nil must stay nil")
	}
	known := []error{
		&pgconn.PgError{Severity: "ERROR", Code: "40001"}, // the server answered: rolled back
		pgx.ErrTxCommitRollback,                           // an earlier error aborted the transaction
	}
	for _, e := range known {
		if err := Classify("x", "commit", "", e); fence.IsIndeterminate(err) || !errors.Is(err, e) {
			t.Errorf("Classify(%v) = %v; want a plain wrap: the outcome is known", e, err)
		}
	}
	unknown := []error{
		&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, // the server shut down during COMMIT
		io.ErrUnexpectedEOF, // the connection was lost
	}
	for _, e := range unknown {
		if err := Classify("x", "commit", "r", e); !fence.IsIndeterminate(err) || !errors.Is(err, e) {
			t.Errorf("Classify(%v) = %v; want a *fence.IndeterminateError wrapping it", e, err)
		}
	}
	if err := Classify("x", "op", "", &pgconn.PgError{Severity: "ERROR", Code: "42P01"}); !errors.Is(err, ErrNotMigrated) {
		t.Errorf("undefined table: %v; want ErrNotMigrated", err)
	}
	if err := Classify("x", "op", "", puddle.ErrClosedPool); !errors.Is(err, ErrClosed) {
		t.Errorf("closed pool: %v; want ErrClosed", err)
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&fence.IndeterminateError{Op: "x", Err: io.EOF}, true},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "55P03"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{ErrNotMigrated, false},
		{ErrClosed, false},
		{&fence.FencedError{Resource: "r", Held: 1}, false},
		{io.ErrUnexpectedEOF, true},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}
