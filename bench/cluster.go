package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// envURL names the variable pointing the benchmarks at an existing server.
const envURL = "DATABASE_URL"

// database returns the URL of the server to benchmark: DATABASE_URL when
// set, otherwise a throwaway cluster that the returned cleanup removes.
// The second result says which, for the report header.
func database(ctx context.Context) (url, where string, cleanup func(), err error) {
	if u := os.Getenv(envURL); u != "" {
		return u, envURL, func() {}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(sctx, pgcluster.Config{Durable: false})
	if err != nil {
		return "", "", nil, fmt.Errorf("start a throwaway PostgreSQL (or set %s): %w", envURL, err)
	}
	return c.URL("postgres"), fmt.Sprintf("throwaway cluster on port %d (fsync off)", c.Port()), func() { c.Remove() }, nil
}
