package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// `batch delete` refuses a batch that is not finished (ErrBatchNotFinished)
// and deletes a finished one (found by its name alone), which `batch
// status` then does not know.
func TestBatchDelete(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	handles(t, pool, "g", "reprice")
	pgtest.Must(t, runJSON(t, &admin.SubmitResult{}, strings.Join(itemLines(0, 4), "\n"), "batch", "submit", "g", "gone", "--database-url", url))
	if _, err := runIn(t, "", "batch", "delete", "g", "gone", "--database-url", url); !errors.Is(err, queue.ErrBatchNotFinished) {
		t.Fatalf("delete of an open batch: %v; want ErrBatchNotFinished", err)
	}
	_, err := runIn(t, "", "batch", "cancel", "g", "gone", "--database-url", url)
	pgtest.Must(t, err)
	out, err := runIn(t, "", "batch", "delete", "gone", "--database-url", url)
	pgtest.Must(t, err)
	if out != "batch gone of group g deleted, with 4 items\n" {
		t.Errorf("delete: %q", out)
	}
	if _, err := runIn(t, "", "batch", "status", "g", "gone", "--database-url", url); !errors.Is(err, queue.ErrUnknownBatch) {
		t.Errorf("status of a deleted batch: %v; want ErrUnknownBatch", err)
	}
}
