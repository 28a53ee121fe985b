package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// logRuns is a logging middleware: one line per run, with its jobs, their
// attempt, how long it took and its error.
func logRuns(log *slog.Logger) queue.Middleware {
	return func(next queue.HandlerFunc) queue.HandlerFunc {
		return func(ctx context.Context, r *queue.Run) error {
			start := time.Now()
			err := next(ctx, r)
			ids := make([]int64, len(r.Jobs))
			for i, j := range r.Jobs {
				ids[i] = j.ID
			}
			log.LogAttrs(ctx, slog.LevelInfo, "job run", slog.String("kind", r.Kind), slog.String("group", r.Group),
				slog.Int("partition", r.Partition), slog.Any("jobs", ids), slog.Int("attempt", r.Jobs[0].Attempt),
				slog.Duration("took", time.Since(start)), slog.Any("err", err))
			return err
		}
	}
}

// Middleware wraps every handler of a Workers (Use) or one handler
// (WithMiddleware); here, logging. The processor calls the chain for every
// run; the example calls it by hand to show what it logs.
func ExampleMiddleware() {
	// Without time and duration, so that the output is the same each run.
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "took" {
			return slog.Attr{}
		}
		return a
	}}))
	ws := queue.NewWorkers()
	ws.Use(logRuns(log)) // every handler of ws
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Welcome]) error { return nil })

	// What the processor does for a run of job 7 of kind "welcome":
	handler := func(ctx context.Context, r *queue.Run) error { return errors.New("smtp: 450 mailbox busy") }
	run := logRuns(log)(handler)
	run(context.Background(), &queue.Run{Kind: "welcome", Group: "emails", Partition: 3,
		Jobs: []queue.RunJob{{ID: 7, Attempt: 2, MaxAttempts: 25}}})
	// Output:
	// level=INFO msg="job run" kind=welcome group=emails partition=3 jobs=[7] attempt=2 err="smtp: 450 mailbox busy"
}

// rateLimit lets at most n runs of a kind start per window, in this
// process; a run over the limit is snoozed (it runs again after the
// window, without spending an attempt) and its handler does not run.
func rateLimit(n int, window time.Duration, now func() time.Time) queue.Middleware {
	var mu sync.Mutex
	type bucket struct {
		start time.Time
		used  int
	}
	buckets := map[string]*bucket{}
	return func(next queue.HandlerFunc) queue.HandlerFunc {
		return func(ctx context.Context, r *queue.Run) error {
			mu.Lock()
			t := now()
			b := buckets[r.Kind]
			if b == nil || t.Sub(b.start) >= window {
				b = &bucket{start: t}
				buckets[r.Kind] = b
			}
			over := b.used >= n
			if !over {
				b.used++
			}
			wait := b.start.Add(window).Sub(t)
			mu.Unlock()
			if over {
				return queue.Snooze(wait)
			}
			return next(ctx, r)
		}
	}
}

// A rate limit as middleware of one handler: runs over the limit are
// snoozed, so they spend no attempt and their handler does not run.
func ExampleMiddleware_rateLimit() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) // a fixed clock, for the example's output
	limit := rateLimit(2, time.Second, func() time.Time { return now })

	ws := queue.NewWorkers()
	queue.Handle(ws, func(ctx context.Context, w *queue.Work[Welcome]) error { return nil },
		queue.WithMiddleware(limit)) // this handler only

	// What the processor does for three runs in one second:
	run := limit(func(ctx context.Context, r *queue.Run) error {
		fmt.Println("sent to job", r.Jobs[0].ID)
		return nil
	})
	for id := int64(1); id <= 3; id++ {
		if err := run(context.Background(), &queue.Run{Kind: "welcome", Jobs: []queue.RunJob{{ID: id}}}); err != nil {
			fmt.Println("job", id, err)
		}
	}
	// Output:
	// sent to job 1
	// sent to job 2
	// job 3 queue: snoozed for 1s
}
