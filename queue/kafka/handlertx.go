package kafka

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// handlerTx is the transaction handed to a Handler. Its Commit and Rollback
// refuse (ErrTxManaged): a handler committing its effects by itself would
// commit them without the offset advance and the fence check, and every
// retry of the batch would apply them again. Savepoints (Begin) work.
type handlerTx struct{ pgx.Tx }

// Commit returns ErrTxManaged.
func (handlerTx) Commit(context.Context) error { return ErrTxManaged }

// Rollback returns ErrTxManaged.
func (handlerTx) Rollback(context.Context) error { return ErrTxManaged }
