package lease_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

// A fn that ends Tx's transaction itself, with a raw COMMIT or ROLLBACK
// through Exec (Commit and Rollback refuse), is reported with ErrTxEnded:
// Tx neither runs its check in autocommit nor reports success (with a
// COMMIT, fn's effects committed without the check; with a ROLLBACK, they
// are gone). The control: the same fn without the raw statement commits.
func TestFenceTxReportsATransactionEndedByFn(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, f := fenceSetup(t)
	la, err := fenceClient(t, pool, "a", nil).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	for _, end := range []string{"COMMIT", "ROLLBACK", "COMMIT, then an error", ""} {
		err := f.Tx(ctx, "p/1", la.Token(), func(tx pgx.Tx) error {
			if err := effect(la.Token(), end)(tx); err != nil {
				return err
			}
			if end != "" {
				stmt, then, _ := strings.Cut(end, ", then ")
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
				if then != "" {
					return errors.New(then)
				}
			}
			return nil
		})
		switch {
		case end == "" && err != nil:
			t.Fatalf("the control, fn without a raw statement: Tx = %v; want nil", err)
		case end != "" && (!errors.Is(err, lease.ErrTxEnded) || fence.IsIndeterminate(err)):
			t.Errorf("fn ran a raw %s: Tx = %v; want ErrTxEnded", end, err)
		case end != "":
			t.Logf("fn ran a raw %s: %v", end, err)
		}
	}
}

// With the server's default isolation above READ COMMITTED, a renewal of
// the lease committed while fn runs must not make Tx fail: the peek takes
// the transaction's snapshot, and a locking check after fn would then fail
// to serialize. Tx locks first in that case, so the renewal waits for its
// commit instead.
func TestFenceTxAboveReadCommittedCommitsDespiteARenewal(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	u, err := url.Parse(pgtest.MigratedURL(t))
	pgtest.Must(t, err)
	q := u.Query()
	q.Set("default_transaction_isolation", "repeatable read")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	pool := pgtest.PoolURL(t, u.String())
	_, err = pool.Exec(ctx, `CREATE TABLE effects (token bigint NOT NULL, note text)`)
	pgtest.Must(t, err)
	var iso string
	pgtest.Must(t, pool.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso))
	if iso != "repeatable read" {
		t.Fatalf("the pool's isolation is %q; the test needs repeatable read", iso)
	}
	f, err := lease.NewFence(pgtest.DBOn(t, pool), lease.FenceConfig{})
	pgtest.Must(t, err)
	la, err := fenceClient(t, pool, "a", nil).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	renewed := make(chan error, 1)
	err = f.Tx(ctx, "p/1", la.Token(), func(tx pgx.Tx) error {
		if err := effect(la.Token(), "across a renewal")(tx); err != nil {
			return err
		}
		go func() { renewed <- la.Renew(context.Background()) }()
		// Either the renewal commits while fn runs (a check after fn would
		// then fail to serialize), or it waits for the row locked first.
		if waitingOrDone(t, pool, renewed) {
			t.Log("the renewal waits for the lease row, locked before fn")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Tx under repeatable read with a renewal during fn = %v; want nil", err)
	}
	if n := count(t, pool, la.Token()); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
	if err := <-renewed; err != nil {
		t.Fatalf("the renewal: %v", err)
	}
}
