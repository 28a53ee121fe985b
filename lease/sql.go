package lease

import (
	"github.com/leasehold/leasehold/internal/leasesql"
	"github.com/leasehold/leasehold/internal/migrations"
)

// queries holds every statement of the package, rendered for one schema.
// The statements themselves, with the reasoning behind each, are in
// internal/leasesql.
type queries struct {
	acquire, acquireMany, renew, release, releaseOrphans, inspect, inspectMany, deleteExpired, lockTable string
}

func render(schema string) (queries, error) {
	q, err := migrations.Schema(schema)
	if err != nil {
		return queries{}, err
	}
	r := func(s string) string { return migrations.Render(s, q) }
	return queries{
		acquire:        r(leasesql.Acquire),
		acquireMany:    r(leasesql.AcquireMany),
		renew:          r(leasesql.Renew),
		release:        r(leasesql.Release),
		releaseOrphans: r(leasesql.ReleaseOrphans),
		inspect:        r(leasesql.Inspect),
		inspectMany:    r(leasesql.InspectMany),
		deleteExpired:  r(leasesql.DeleteExpired),
		lockTable:      r(leasesql.LockTable),
	}, nil
}
