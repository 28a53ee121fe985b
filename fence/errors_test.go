package fence

import (
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestCommitErrClassification(t *testing.T) {
	if commitErr(nil) != nil {
		t.Fatal("nil must stay nil")
	}
	if err := commitErr(&pgconn.PgError{Severity: "ERROR", Code: "40001"}); IsIndeterminate(err) {
		t.Fatalf("a server error at commit means rolled back, not unknown: %v", err)
	}
	if err := commitErr(pgx.ErrTxCommitRollback); IsIndeterminate(err) {
		t.Fatalf("a commit turned into a rollback is known: %v", err)
	}
	if err := commitErr(&pgconn.PgError{Severity: "FATAL", Code: "57P01"}); !IsIndeterminate(err) {
		t.Fatalf("a FATAL error during commit (the server shut down) leaves the outcome unknown: %v", err)
	}
	if err := commitErr(io.ErrUnexpectedEOF); !IsIndeterminate(err) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a connection lost during commit must be indeterminate: %v", err)
	}
}
