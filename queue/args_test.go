package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
)

// A typed nil Args is bad input: it must give an error, not a panic.
func TestTypedNilArgsIsAnError(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	_, c := setup(t)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Enqueue panicked: %v", r)
		}
	}()
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: (*ptrKind)(nil)})
	if !errors.Is(err, queue.ErrInvalidJob) {
		t.Fatalf("err = %v; want ErrInvalidJob", err)
	}
}

// Args of a pointer type work end to end (registration must not call Kind
// on a nil pointer).
func TestPointerArgs(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	pool, c := setup(t)
	got := make(chan int, 1)
	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[*ptrKind]) error {
		got <- w.Args.N
		return nil
	})
	_, err := c.Enqueue(ctx, queue.Job{Group: "emails", Key: "k", Args: &ptrKind{N: 7}})
	pgtest.Must(t, err)
	startWorker(t, pool, "w1", ws, nil)
	select {
	case n := <-got:
		if n != 7 {
			t.Fatalf("handler got N = %d; want 7", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pointer-args job never ran")
	}
}

type ptrKind struct{ N int }

func (ptrKind) Kind() string { return "ptr_kind" }
