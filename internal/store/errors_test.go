package store

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/leasehold/leasehold/fence"
)

// The classifiers: what a caller may branch on after a failed write, a
// failed COMMIT and a failed read.
func TestClassify(t *testing.T) {
	for name, f := range map[string]func(string, string, string, error) error{
		"Classify": Classify, "ClassifyCommit": ClassifyCommit, "ClassifyRead": ClassifyRead,
	} {
		if f("x", "op", "", nil) != nil {
			t.Errorf("%s(nil) != nil", name)
		}
		if err := f("x", "op", "", &pgconn.PgError{Severity: "ERROR", Code: "42P01"}); !errors.Is(err, ErrNotMigrated) {
			t.Errorf("%s(undefined table) = %v; want ErrNotMigrated", name, err)
		}
		if err := f("x", "op", "", puddle.ErrClosedPool); !errors.Is(err, ErrClosed) {
			t.Errorf("%s(closed pool) = %v; want ErrClosed", name, err)
		}
	}
	connect := &pgconn.ConnectError{}
	rolledBack := &pgconn.PgError{Severity: "ERROR", Code: "40001"}
	localized := &pgconn.PgError{Severity: "ERRORE", SeverityUnlocalized: "ERROR", Code: "40001"}
	fatal := &pgconn.PgError{Severity: "FATAL", Code: "57P01"}
	fatalLocalized := &pgconn.PgError{Severity: "FATALE", SeverityUnlocalized: "FATAL", Code: "57P01"}
	for _, tc := range []struct {
		name          string
		err           error
		write, commit bool // indeterminate from Classify, from ClassifyCommit
	}{
		{"an ERROR answer rolled back", rolledBack, false, false},
		{"a localized ERROR answer rolled back", localized, false, false},
		{"a FATAL answer (the server shut down) leaves it unknown", fatal, true, true},
		{"a localized FATAL answer leaves it unknown", fatalLocalized, true, true},
		{"a connection that never opened sent nothing", connect, false, false},
		{"a lost connection leaves it unknown", io.ErrUnexpectedEOF, true, true},
		{"an aborted transaction's COMMIT rolls back", pgx.ErrTxCommitRollback, true, false},
		{"a transaction already closed: decided elsewhere", pgx.ErrTxClosed, true, true},
	} {
		if got := fence.IsIndeterminate(Classify("x", "op", "r", tc.err)); got != tc.write {
			t.Errorf("Classify: %s: indeterminate = %v; want %v", tc.name, got, tc.write)
		}
		if got := fence.IsIndeterminate(ClassifyCommit("x", "commit", "r", tc.err)); got != tc.commit {
			t.Errorf("ClassifyCommit: %s: indeterminate = %v; want %v", tc.name, got, tc.commit)
		}
		if err := ClassifyRead("x", "read", "r", tc.err); fence.IsIndeterminate(err) || !errors.Is(err, tc.err) {
			t.Errorf("ClassifyRead: %s = %v; want a plain wrap: a read has no unknown outcome", tc.name, err)
		}
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
		{&pgconn.PgError{Severity: "FATAL", Code: "3D000"}, false}, // no such database: retrying cannot help
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

func TestIsServerTimeout(t *testing.T) {
	for code, want := range map[string]bool{"57014": true, "55P03": true, "25P03": true, "42P01": false, "08006": false} {
		err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: code})
		if got := IsServerTimeout(err); got != want {
			t.Errorf("IsServerTimeout(%s) = %v; want %v", code, got, want)
		}
	}
	if IsServerTimeout(errors.New("connection refused")) {
		t.Error("a connection failure counted as a server timeout")
	}
}
