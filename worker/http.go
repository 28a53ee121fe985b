package worker

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler returns the worker's HTTP handler:
//
//   - /metrics: the Prometheus metrics, if Config.Registerer is also a
//     prometheus.Gatherer (the default registry of the worker is);
//   - /healthz: 200 while the worker is not stopped and has not failed
//     (liveness: it does not depend on the database, so an outage does not
//     get healthy workers restarted);
//   - /readyz: 200 once started, while not stopping, if the source is
//     ready (a Kafka consumer's last metadata read succeeded) and the
//     database answers within a second; 503 otherwise, with the reason.
func (w *Worker) Handler() http.Handler {
	mux := http.NewServeMux()
	if g, ok := w.cfg.Registerer.(prometheus.Gatherer); ok {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) {
		respond(rw, w.health())
	})
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, r *http.Request) {
		respond(rw, w.Ready(r.Context()))
	})
	return mux
}

func respond(rw http.ResponseWriter, err error) {
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err != nil {
		rw.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(rw, err)
		return
	}
	fmt.Fprintln(rw, "ok")
}

// health is nil unless the worker is stopping or has failed.
func (w *Worker) health() error {
	select {
	case <-w.stop:
		return ErrStopped
	default:
	}
	if err := w.member.Err(); err != nil {
		return fmt.Errorf("worker: failed: %w", err)
	}
	return nil
}

// Ready returns nil when the worker is started, not stopping, not failed,
// its source is ready (with Kafka: the consumer's last read of the topics'
// metadata succeeded, see kafka.Consumer.Ready) and its database answers
// within a second (or ctx); otherwise an error saying why.
func (w *Worker) Ready(ctx context.Context) error {
	select {
	case <-w.ready:
	default:
		return fmt.Errorf("worker: not started")
	}
	if err := w.health(); err != nil {
		return err
	}
	if err := w.src.ready(); err != nil {
		return fmt.Errorf("worker: source not ready: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w.pool.Ping(ctx); err != nil {
		return fmt.Errorf("worker: database unreachable: %w", err)
	}
	return nil
}
