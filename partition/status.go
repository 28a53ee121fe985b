package partition

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/store"
)

// Status is a read-only view of a group, for status screens. Times are the
// database's.
type Status struct {
	Group      string
	Partitions []PartitionStatus
	Members    []MemberStatus
}

// PartitionStatus is one partition's lease as the database sees it.
type PartitionStatus struct {
	Partition int
	Owner     string // member id of the lease's holder; "" if never granted
	// Incarnation is the holder's incarnation: tells a restarted member's
	// lease from its previous process's.
	Incarnation string
	Token       fence.Token // the latest grant's token
	Acquired    time.Time
	Expires     time.Time
	Held        bool // the lease was unexpired when read
	// Released reports that the lease is not held because its holder
	// released it (a graceful stop, a handoff), not because it expired.
	Released bool
	// Desired is the owner the assignment wants among the live members.
	Desired string
}

// MemberStatus is one member row.
type MemberStatus struct {
	ID string
	// Incarnation tells two processes using the same id apart (random per
	// process).
	Incarnation string
	Joined      time.Time
	Heartbeat   time.Time
	Expires     time.Time
	Live        bool
}

// Inspect reads the status of group in db. It returns an error wrapping
// ErrGroupNotFound for an unknown group.
func Inspect(ctx context.Context, db *leasehold.DB, group string) (Status, error) {
	if db.Pool() == nil {
		return Status{}, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	st0, err := store.For(db.Schema())
	if err != nil {
		return Status{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	q, pool := st0.Partition, db.Pool()
	st := Status{Group: group}
	rows, err := pool.Query(ctx, q.Members, group)
	if err != nil {
		return st, store.ClassifyRead("partition", "inspect", group, err)
	}
	var live []string
	for rows.Next() {
		var ms MemberStatus
		if err := rows.Scan(&ms.ID, &ms.Incarnation, &ms.Joined, &ms.Heartbeat, &ms.Expires, &ms.Live); err != nil {
			rows.Close()
			return st, store.ClassifyRead("partition", "inspect", group, err)
		}
		if ms.Live {
			live = append(live, ms.ID)
		}
		st.Members = append(st.Members, ms)
	}
	if err := rows.Err(); err != nil {
		return st, store.ClassifyRead("partition", "inspect", group, err)
	}
	rows, err = pool.Query(ctx, q.Status, group)
	if err != nil {
		return st, store.ClassifyRead("partition", "inspect", group, err)
	}
	for rows.Next() {
		var ps PartitionStatus
		var owner *string
		var tok *int64
		var acq, exp *time.Time
		if err := rows.Scan(&ps.Partition, &owner, &tok, &acq, &exp, &ps.Held, &ps.Released); err != nil {
			rows.Close()
			return st, store.ClassifyRead("partition", "inspect", group, err)
		}
		if owner != nil {
			ps.Owner, ps.Token, ps.Acquired, ps.Expires = MemberOf(*owner), fence.Token(*tok), *acq, *exp
			ps.Incarnation = strings.TrimPrefix((*owner)[len(ps.Owner):], "#")
		}
		st.Partitions = append(st.Partitions, ps)
	}
	if err := rows.Err(); err != nil {
		return st, store.ClassifyRead("partition", "inspect", group, err)
	}
	if len(st.Partitions) == 0 {
		var n int
		if err := pool.QueryRow(ctx, q.GroupCount, group).Scan(&n); errors.Is(err, pgx.ErrNoRows) {
			return st, fmt.Errorf("partition: inspect %q: %w", group, ErrGroupNotFound)
		}
	}
	owners, err := Assign(live, max(len(st.Partitions), 1))
	if err == nil {
		for i := range st.Partitions {
			st.Partitions[i].Desired = owners[i]
		}
	}
	return st, nil
}

// Groups returns the names of the groups in db, in name order.
func Groups(ctx context.Context, db *leasehold.DB) ([]string, error) {
	if db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero *leasehold.DB (use leasehold.Open)", ErrInvalidConfig)
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	rows, err := db.Pool().Query(ctx, st.Partition.Groups)
	if err != nil {
		return nil, store.ClassifyRead("partition", "groups", "", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, store.ClassifyRead("partition", "groups", "", err)
	}
	return names, nil
}
