package worker

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Run is for a program's main: it starts w, waits until ctx is done (wire
// it to SIGTERM and SIGINT with signal.NotifyContext), then stops w
// gracefully. A second SIGTERM or SIGINT during the stop makes it stop
// hard: Stop returns at once and the leases expire after their TTL. Run
// returns Start's error, or Stop's.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	w.log.Info("worker: stopping; a second signal stops at once", "cause", context.Cause(ctx))
	sctx, stop := signal.NotifyContext(context.WithoutCancel(ctx), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return w.Stop(sctx)
}
