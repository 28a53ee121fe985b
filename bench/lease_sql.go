package main

import (
	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/store"
)

// The raw-sql baseline runs exactly the statements the lease package runs:
// both take them from internal/store.

// rawQueries are the lease statements rendered for one schema, the way the
// lease package renders them (the schema quoted as an identifier).
type rawQueries struct {
	acquire, acquireMany, renew, release string
	table                                string // the quoted lease table
}

func renderQueries(schema string) (rawQueries, error) {
	st, err := store.For(schema)
	if err != nil {
		return rawQueries{}, err
	}
	return rawQueries{
		acquire:     st.Lease.Acquire,
		acquireMany: st.Lease.AcquireMany,
		renew:       st.Lease.Renew,
		release:     st.Lease.Release,
		table:       quoteIdent(schema) + ".leases",
	}, nil
}

// quoteIdent quotes name as an SQL identifier.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }
