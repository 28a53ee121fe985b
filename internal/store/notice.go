package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/fence"
)

// ErrNotReplicated means a COMMIT, or a statement committing on its own,
// was committed locally, but the server stopped waiting for the
// synchronous standby to confirm it (the wait was cancelled: a cancel
// request, a statement timeout, an administrator): the server answered
// success with a WARNING. A failover to the standby may lose it. leasehold
// reports it as an unknown outcome (*fence.IndeterminateError), never as
// success.
var ErrNotReplicated = errors.New("leasehold: committed locally but not confirmed by the synchronous standby")

// NotReplicatedError is ErrNotReplicated with the server's warning.
type NotReplicatedError struct {
	Notice *pgconn.Notice
}

// Error returns the error message.
func (e *NotReplicatedError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrNotReplicated, e.Notice.Message, e.Notice.Detail)
}

// Unwrap returns ErrNotReplicated.
func (e *NotReplicatedError) Unwrap() error { return ErrNotReplicated }

// watches holds the connections whose notices are being watched: only
// while a COMMIT (or a statement committing on its own) that leasehold
// must not take for success runs on them, so it holds no closed
// connection.
var watches sync.Map // *pgconn.PgConn -> *atomic.Pointer[pgconn.Notice]

// NoticeHook returns a notice handler that records, on a watched
// connection, the server's warning of a cancelled wait for synchronous
// replication, then calls next (if not nil). Install it as the
// OnNotice of a pool's connection configuration; DerivePool does so for
// leasehold's own pools. The handler runs on the goroutine reading the
// statement's reply, before the statement returns.
func NoticeHook(next pgconn.NoticeHandler) pgconn.NoticeHandler {
	return func(c *pgconn.PgConn, n *pgconn.Notice) {
		if unreplicated(n) {
			if w, ok := watches.Load(c); ok {
				w.(*atomic.Pointer[pgconn.Notice]).Store(n)
			}
		}
		if next != nil {
			next(c, n)
		}
	}
}

// unreplicated reports whether n is the server's warning that it stopped
// waiting for synchronous replication of a transaction that committed
// locally ("canceling wait for synchronous replication due to user
// request", "canceling the wait for synchronous replication and
// terminating connection due to administrator command", both with the
// detail "The transaction has already committed locally, but might not
// have been replicated to the standby."). The message is matched in
// English: a server whose lc_messages translates it is not recognised
// (docs/reliability.md).
func unreplicated(n *pgconn.Notice) bool {
	sev := n.SeverityUnlocalized
	if sev == "" {
		sev = n.Severity
	}
	return sev == "WARNING" && (strings.Contains(n.Message, "synchronous replication") ||
		strings.Contains(n.Detail, "committed locally"))
}

// Watch starts watching conn for the warning of a cancelled wait for
// synchronous replication, and returns the function that stops watching:
// it returns a *NotReplicatedError if the warning arrived meanwhile, nil
// otherwise. Connections of a pool without NoticeHook never report one.
func Watch(conn *pgconn.PgConn) (done func() error) {
	w := new(atomic.Pointer[pgconn.Notice])
	watches.Store(conn, w)
	return func() error {
		watches.CompareAndDelete(conn, w)
		if n := w.Load(); n != nil {
			return &NotReplicatedError{Notice: n}
		}
		return nil
	}
}

// Commit commits tx, watching for the warning of a cancelled wait for
// synchronous replication: a COMMIT that the server answered with success
// and that warning returns a *fence.IndeterminateError (op, resource)
// wrapping a *NotReplicatedError. Other errors of the COMMIT are returned
// as they are, for ClassifyCommit.
func Commit(ctx context.Context, tx pgx.Tx, op, resource string) error {
	done := Watch(tx.Conn().PgConn())
	err := tx.Commit(ctx)
	if nr := done(); err == nil && nr != nil {
		return &fence.IndeterminateError{Op: op, Resource: resource, Err: nr}
	}
	return err
}
