package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// progress prints a batch's progress lines.
type progress struct {
	c           *queue.Client
	out         io.Writer
	group, name string
	prev        queue.BatchInfo // the previous read, for the current rate
}

// print reads the batch (a read of two rows per partition, whatever its
// size) and prints a line:
//
//	progress: 640/1200 finished (53%), 0 failed, 0 cancelled, 560 pending, batch running; 812 items/s, ETA 1s
//
// The rate is measured between this read and the previous one (Rate, the
// average since the batch was created, on the first read): after a
// restart, the average would count the time the program was down.
func (p *progress) print(ctx context.Context) (queue.BatchInfo, error) {
	b, err := p.c.Batch(ctx, p.group, p.name)
	if err != nil {
		return b, err
	}
	rate := b.Rate()
	if !p.prev.ReadAt.IsZero() && b.ReadAt.After(p.prev.ReadAt) {
		rate = float64(finished(b)-finished(p.prev)) / b.ReadAt.Sub(p.prev.ReadAt).Seconds()
	}
	p.prev = b
	pct := int64(0)
	if b.Total > 0 {
		pct = finished(b) * 100 / b.Total // 100% only once every item finished
	}
	eta := "?"
	if d := b.ETA(rate); d >= 0 {
		eta = d.Round(time.Second).String()
	}
	fmt.Fprintf(p.out, "progress: %d/%d finished (%d%%), %d failed, %d cancelled, %d pending, batch %s; %.0f items/s, ETA %s\n",
		finished(b), b.Total, pct, b.Failed, b.Cancelled, b.Pending, b.State(), rate, eta)
	return b, nil
}

// until prints a line every interval until the batch has finished (every
// item of the sealed batch finished, its on-complete follow-up enqueued),
// and returns the last read.
func (p *progress) until(ctx context.Context, every time.Duration) (queue.BatchInfo, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		b, err := p.print(ctx)
		if err != nil || b.FinishedAt != nil {
			return b, err
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-t.C:
		}
	}
}

func finished(b queue.BatchInfo) int64 { return b.Total - b.Pending }

// lockedWriter serializes the lines of the progress printer and the
// producer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
