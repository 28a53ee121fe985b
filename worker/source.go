package worker

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/partition"
)

// source is what a worker runs on the partitions it owns: the queue's jobs
// (queueSource) or a Kafka consumer (kafkaSource). The worker owns the
// rest: membership, leases, metrics, health, Start, Stop and Run.
type source interface {
	// open prepares the source. Start calls it before joining the group;
	// ctx bounds the start-up.
	open(ctx context.Context) error
	// joined is called by Start once the member has joined group (the
	// group exists), before Start returns; ctx bounds the start-up.
	joined(ctx context.Context, group string) error
	// run works on one owned partition until ctx is cancelled (handoff,
	// lost lease, Stop): the partition member's Run.
	run(ctx context.Context, o partition.Ownership)
	// close undoes open. Stop calls it after the partitions were given
	// up, bounded by ctx.
	close(ctx context.Context) error
	// ready is nil while the source can work; otherwise why not (Ready,
	// /readyz).
	ready() error
	// collectors are the source's own metrics, registered beside the
	// worker's.
	collectors() []prometheus.Collector
}
