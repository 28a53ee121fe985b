package admin

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/store"
)

// OutboxCounted is how many of a partition's oldest outbox segments
// ReadOutbox counts the records of: a partition with more waiting reports
// a lower bound (OutboxPartition.RecordsPartial), so that the read costs
// the same however far behind the relay is.
const OutboxCounted = 100

// OutboxStatus is what waits in a group's fenced outbox (package outbox)
// to be published to Kafka by the relay (kafka.Relay), as `leasehold
// status --json` prints it: the committed segments (the records of one
// handler transaction each) not yet deleted, which are those not yet
// published, and those just published whose deletion has not yet
// committed.
type OutboxStatus struct {
	// Segments and Records are the totals of Partitions.
	Segments int64 `json:"segments"`
	Records  int64 `json:"records"`
	// RecordsPartial reports that Records is a lower bound: some
	// partition's is.
	RecordsPartial bool `json:"records_partial"`
	// OldestAgeMS is the largest OldestAgeMS of the partitions; 0 when
	// nothing waits.
	OldestAgeMS int64 `json:"oldest_age_ms"`
	// Partitions are the partitions with segments waiting, in partition
	// order; [] when none has.
	Partitions []OutboxPartition `json:"partitions"`
}

// OutboxPartition is what waits in the outbox of one partition.
type OutboxPartition struct {
	Partition int `json:"partition"`
	// Segments is how many segments wait.
	Segments int64 `json:"segments"`
	// Records is how many records they hold; a lower bound when
	// RecordsPartial (more than OutboxCounted segments wait: the records
	// of the oldest OutboxCounted only are counted).
	Records        int64 `json:"records"`
	RecordsPartial bool  `json:"records_partial"`
	// OldestAt is when the oldest segment committed; OldestAgeMS its age,
	// on the database clock.
	OldestAt    time.Time `json:"oldest_at"`
	OldestAgeMS int64     `json:"oldest_age_ms"`
	// Owner and Token are the partition's lease holder and the latest
	// grant's token, Held whether the lease is unexpired, as in the
	// group's PartitionStatus: the relay of the owner's worker publishes
	// the partition's outbox while it holds the lease.
	Owner string `json:"owner"`
	Token int64  `json:"token"`
	Held  bool   `json:"held"`
}

// ReadOutbox reads the outbox of group g.Group, in one statement whatever
// the number of partitions and of segments waiting (see OutboxCounted);
// each partition's owner and token come from g.Partitions. It returns nil
// when no handler of the group ever appended to the outbox.
func ReadOutbox(ctx context.Context, db *leasehold.DB, g GroupStatus) (*OutboxStatus, error) {
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, err
	}
	rows, err := db.Pool().Query(ctx, st.OutboxInsight.Waiting, g.Group, OutboxCounted)
	if err != nil {
		return nil, store.ClassifyRead("admin", "outbox", g.Group, err)
	}
	var out *OutboxStatus
	var (
		part          int
		last, counted int64
		records       int64
		oldest        *int64 // the oldest segment's sequence number; nil: none waits
		oldestAt      *time.Time
		now           time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&part, &last, &oldest, &oldestAt, &counted, &records, &now}, func() error {
		if out == nil {
			out = &OutboxStatus{Partitions: []OutboxPartition{}}
		}
		if oldest == nil {
			return nil
		}
		op := OutboxPartition{Partition: part, Records: records, OldestAt: oldestAt.UTC(),
			OldestAgeMS: max(0, now.Sub(*oldestAt).Milliseconds())}
		// Segments are numbered without gaps and deleted oldest first:
		// those waiting are the oldest to the last.
		op.Segments = last - *oldest + 1
		if counted < OutboxCounted {
			op.Segments = counted // all were counted
		} else {
			op.RecordsPartial = op.Segments > counted
		}
		for _, ps := range g.Partitions {
			if ps.Partition == part {
				op.Owner, op.Token, op.Held = ps.Owner, ps.Token, ps.Held
			}
		}
		out.Segments += op.Segments
		out.Records += op.Records
		out.RecordsPartial = out.RecordsPartial || op.RecordsPartial
		out.OldestAgeMS = max(out.OldestAgeMS, op.OldestAgeMS)
		out.Partitions = append(out.Partitions, op)
		return nil
	})
	if err != nil {
		return nil, store.ClassifyRead("admin", "outbox", g.Group, err)
	}
	return out, nil
}
