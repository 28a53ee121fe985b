package leasehold_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/kafka"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/worker"
)

// A DB must come from Open: every constructor and function taking one
// refuses a nil or zero DB with its package's ErrInvalidConfig instead of
// panicking later.
func TestComponentsRefuseADBNotFromOpen(t *testing.T) {
	ctx := context.Background()
	for name, db := range map[string]*leasehold.DB{"nil": nil, "zero": {}} {
		errs := map[string]error{}
		_, errs["lease.New"] = lease.New(db, lease.Config{})
		_, errs["lease.NewFence"] = lease.NewFence(db, lease.FenceConfig{})
		_, errs["partition.New"] = partition.New(db, partition.Config{Group: "g", Partitions: 1,
			Run: func(context.Context, partition.Ownership) {}})
		_, errs["partition.Inspect"] = partition.Inspect(ctx, db, "g")
		_, errs["partition.Groups"] = partition.Groups(ctx, db)
		_, errs["queue.New"] = queue.New(db, queue.Config{})
		_, errs["queue.NewProcessor"] = queue.NewProcessor(db, queue.ProcessorConfig{Workers: queue.NewWorkers()})
		_, errs["kafka.New"] = kafka.New(db, kafka.Config{Topics: []string{"t"}, Brokers: []string{"b:1"},
			Handler: func(context.Context, pgx.Tx, *kafka.Batch) error { return nil }})
		_, errs["kafka.Offsets"] = kafka.Offsets(ctx, db, "g")
		_, errs["worker.New"] = worker.New(db, worker.Config{Group: "g", Workers: queue.NewWorkers()})
		errs["DB.Migrate"] = db.Migrate(ctx)
		_, errs["DB.SchemaVersion"] = db.SchemaVersion(ctx)
		for call, err := range errs {
			if err == nil || !errors.Is(err, invalidConfigOf(call)) {
				t.Errorf("%s on a %s DB = %v; want its package's ErrInvalidConfig", call, name, err)
			}
		}
	}
}

func invalidConfigOf(call string) error {
	pkg, _, _ := strings.Cut(call, ".")
	return map[string]error{"lease": lease.ErrInvalidConfig, "partition": partition.ErrInvalidConfig,
		"queue": queue.ErrInvalidConfig, "kafka": kafka.ErrInvalidConfig, "worker": worker.ErrInvalidConfig,
		"DB": leasehold.ErrInvalidConfig}[pkg]
}
