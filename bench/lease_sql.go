package main

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/leasesql"
)

// The raw-sql baseline runs exactly the statements the lease package runs:
// both take them from internal/leasesql.

// rawQueries are the lease statements rendered for one schema, the way the
// lease package renders them (the schema quoted as an identifier).
type rawQueries struct {
	acquire, acquireMany, renew, release string
	table                                string // the quoted lease table
}

func renderQueries(schema string) rawQueries {
	q := quoteIdent(schema)
	r := func(s string) string { return strings.ReplaceAll(s, "{{schema}}", q) }
	return rawQueries{
		acquire:     r(leasesql.Acquire),
		acquireMany: r(leasesql.AcquireMany),
		renew:       r(leasesql.Renew),
		release:     r(leasesql.Release),
		table:       q + ".leases",
	}
}

// quoteIdent quotes name as an SQL identifier.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
