package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// BenchmarkJobContext is the per-job cost of a run's context and its
// entry in the grant's running set (see runOne), no cancel used: with the
// default JobTimeout, and with none; and, for reference, a plain timeout
// context.
func BenchmarkJobContext(b *testing.B) {
	b.Run("reference", func(b *testing.B) { // a plain timeout context: what a run cost before cancels
		hctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeoutCause(hctx, time.Minute, ErrJobTimeout)
			_ = ctx.Err()
			cancel()
		}
	})
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"timeout", time.Minute}, {"none", -1}} {
		b.Run(c.name, func(b *testing.B) {
			p := &Processor{cfg: ProcessorConfig{JobTimeout: c.timeout}, timeoutCause: ErrJobTimeout}
			hctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			set := &runningSet{o: partition.Ownership{Group: "g"}, jobs: make(map[int64]runningJob)}
			r := &run{p: p, set: set}
			f := fetched{id: 1, kind: "k"}
			b.ReportAllocs()
			for b.Loop() {
				jc := p.jobContext(hctx, handler{})
				r.track(f, jc.cancel, time.Time{})
				_ = jc.ctx.Err()
				r.untrack(f)
				r.isCancelled(f.id)
				jc.release()
			}
		})
	}
}

// A run's context: its deadline, a timeout reported as the standard
// library's (DeadlineExceeded, the timeout's cause), a cancel with its
// cause (Canceled, ErrJobCancelled), and release.
func TestJobContext(t *testing.T) {
	cause := fmt.Errorf("%w after 1ms", ErrJobTimeout)
	p := &Processor{cfg: ProcessorConfig{JobTimeout: time.Millisecond}, timeoutCause: cause}
	jc := p.jobContext(context.Background(), handler{})
	if d, ok := jc.ctx.Deadline(); !ok || time.Until(d) > time.Millisecond {
		t.Fatalf("Deadline %v, %v; want within 1ms", d, ok)
	}
	child, stop := context.WithCancel(jc.ctx)
	defer stop()
	<-jc.ctx.Done()
	<-child.Done()
	if err := jc.ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err after the timeout = %v; want DeadlineExceeded", err)
	}
	if c := context.Cause(jc.ctx); c != cause || context.Cause(child) != cause {
		t.Fatalf("Cause after the timeout = %v (child %v); want %v", c, context.Cause(child), cause)
	}
	if err := child.Err(); err != context.DeadlineExceeded {
		// Code the handler calls tells a timeout from a cancel by this.
		t.Fatalf("a derived context's Err after the timeout = %v; want DeadlineExceeded", err)
	}
	if err := timedOut(jc.ctx, child.Err()); !errors.Is(err, ErrJobTimeout) {
		t.Fatalf("timedOut(child's error) = %v; want ErrJobTimeout", err)
	}
	jc.release()

	p.cfg.JobTimeout = time.Hour
	jc = p.jobContext(context.Background(), handler{})
	jc.cancel(ErrJobCancelled)
	if err := jc.ctx.Err(); err != context.Canceled || context.Cause(jc.ctx) != ErrJobCancelled {
		t.Fatalf("cancelled: Err %v, Cause %v; want Canceled, ErrJobCancelled", err, context.Cause(jc.ctx))
	}
	if err := timedOut(jc.ctx, jc.ctx.Err()); errors.Is(err, ErrJobTimeout) {
		t.Fatalf("timedOut(cancelled) = %v; want no timeout", err)
	}
	jc.release()

	p.cfg.JobTimeout = -1
	jc = p.jobContext(context.Background(), handler{})
	if _, ok := jc.ctx.Deadline(); ok {
		t.Fatal("no timeout: the context has a deadline")
	}
	jc.release()
	if jc.ctx.Err() != context.Canceled {
		t.Fatalf("released: Err %v; want Canceled", jc.ctx.Err())
	}
}
