package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// A second handler for a kind is refused by NewProcessor, whichever of
// Handle, HandleTx and HandleTxBatch registers it, naming the kind; one
// handler per kind (the control) is accepted.
func TestSecondHandlerForAKindIsRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.DBOn(t, pgtest.Pool(t))
	plain := func(ws *queue.Workers) {
		queue.Handle(ws, func(context.Context, *queue.Work[email]) error { return nil })
	}
	tx := func(ws *queue.Workers) {
		queue.HandleTx(ws, func(context.Context, pgx.Tx, *queue.Work[email]) error { return nil })
	}
	batch := func(ws *queue.Workers) {
		queue.HandleTxBatch(ws, func(context.Context, pgx.Tx, []*queue.Work[email]) error { return nil })
	}
	other := func(ws *queue.Workers) {
		queue.Handle(ws, func(context.Context, *queue.Work[step]) error { return nil })
	}
	for name, regs := range map[string][]func(*queue.Workers){
		"Handle twice":             {plain, plain},
		"Handle then HandleTx":     {plain, other, tx},
		"HandleTx then batch":      {tx, batch},
		"three for one kind":       {batch, plain, tx},
		"on a zero Workers value":  {plain, tx},
		"control: one per kind":    {plain, other},
		"control: zero, one each":  {tx, other},
		"control: batch and other": {batch, other},
	} {
		ws := queue.NewWorkers()
		if strings.HasPrefix(name, "on a zero") || strings.HasPrefix(name, "control: zero") {
			ws = &queue.Workers{}
		}
		for _, r := range regs {
			r(ws)
		}
		_, err := queue.NewProcessor(db, queue.ProcessorConfig{Workers: ws})
		if strings.HasPrefix(name, "control") {
			if err != nil {
				t.Errorf("%s: %v; want no error", name, err)
			}
			continue
		}
		if !errors.Is(err, queue.ErrDuplicateHandler) || !errors.Is(err, queue.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), `"email"`) {
			t.Errorf("%s: %v; want an ErrDuplicateHandler error naming the kind \"email\"", name, err)
		}
	}
}
