package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/queue"
)

// report shows the request's own faults as they are, and the database's
// (a 5xx, a value PostgreSQL refused, a cancelled request) by their kind
// and an error id alone, logged with that id: at ERROR for a 5xx, at WARN
// otherwise.
func TestReportHidesDatabaseErrors(t *testing.T) {
	log := &logtest.Buffer{}
	h := &Handler{log: slog.New(slog.NewTextHandler(log, nil)), cfg: Config{Timeout: 300 * time.Millisecond}}
	r := httptest.NewRequest(http.MethodGet, "/jobs?group=x", nil)
	secret := &pgconn.PgError{Code: "22021", Message: `invalid byte sequence in table secret_table`}
	for _, c := range []struct {
		status int
		err    error
		says   string // "" for the error's own text
		level  string
	}{
		{http.StatusBadRequest, badInput("partition %q is not a partition number", "x"), "", "WARN"},
		{http.StatusNotFound, badNotFound("group %q does not exist", "x"), "", "WARN"},
		{http.StatusBadRequest, fmt.Errorf("queue: list: %w", secret), "the database refused a value of the request", "WARN"},
		{http.StatusServiceUnavailable, errors.New("failed to connect to `user=secret_user database=secret_db`"), "the database failed or could not be reached", "ERROR"},
		{http.StatusServiceUnavailable, h.explain(fmt.Errorf("secret_table: %w", context.DeadlineExceeded)), "the database did not answer within 300ms (the UI's timeout)", "ERROR"},
		{statusClientClosed, fmt.Errorf("secret_table: %w", context.Canceled), "the request was cancelled", "WARN"},
	} {
		msg := h.report(r, "ui: request failed", c.status, c.err)
		if c.says == "" {
			if msg != c.err.Error() {
				t.Errorf("%d %v: shown as %q; want the error", c.status, c.err, msg)
			}
			continue
		}
		id := strings.TrimSuffix(strings.TrimPrefix(msg, c.says+" (error "), ": the UI's log has the details)")
		line := ""
		for l := range strings.Lines(log.String()) {
			if strings.Contains(l, "error_id="+id+" err=") {
				line = l
			}
		}
		if strings.Contains(msg, "secret") || len(id) != 10 || !strings.Contains(line, "level="+c.level+" ") ||
			!strings.Contains(line, "secret") {
			t.Errorf("%d %v: shown as %q; want %q and an error id logged at %s:\n%s", c.status, c.err, msg, c.says, c.level, log)
		}
	}
}

// An action a batch's state refuses (a retry of a cancelled batch's item)
// is the request's fault, shown as it is (409), not a database outage.
func TestBatchStateRefusalIsAConflict(t *testing.T) {
	refused := &queue.CancelledItemsError{IDs: []int64{7}}
	if got := status(refused); got != http.StatusConflict {
		t.Errorf("status(%v) = %d; want 409", refused, got)
	}
	for _, err := range []error{queue.ErrBatchSealed, queue.ErrBatchNotFinished, fmt.Errorf("x: %w", queue.ErrBatchCancelled)} {
		if got := status(err); got != http.StatusConflict {
			t.Errorf("status(%v) = %d; want 409", err, got)
		}
	}
	if got := status(errors.New("connection refused")); got != http.StatusServiceUnavailable { // the control
		t.Errorf("status(connection refused) = %d; want 503", got)
	}
}
