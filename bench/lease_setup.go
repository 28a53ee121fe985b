package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/lease"
)

// releaseStock returns how many leases each worker pre-acquires for an
// unbatched release case: the latest acquire rate times the duration,
// over-provisioned.
func (b *leaseBench) releaseStock(sys string, d time.Duration) int {
	rate := b.acquireRate[sys]
	if rate <= 0 { // acquire did not run: assume a fast server
		rate = 40000
	}
	n := int(math.Ceil(rate*d.Seconds()*releaseStockFactor/float64(b.f.workers))) + 256
	return min(n, 1_000_000/b.f.workers)
}

// reset makes s forget its leases and empties the lease table, then
// checkpoints so that no measurement pays for another's dirty pages.
func (b *leaseBench) reset(ctx context.Context, s leaseSystem) error {
	s.forget()
	if _, err := b.admin.Exec(ctx, "TRUNCATE "+b.q.table); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	b.admin.Exec(ctx, "CHECKPOINT") // needs privileges a DATABASE_URL role may lack: best effort
	return nil
}

// prepareSchema migrates schema and reports whether this run created it.
// It refuses a schema whose lease table holds rows, since the suite empties
// that table.
func prepareSchema(ctx context.Context, admin *pgxpool.Pool, schema string) (created bool, err error) {
	var existed bool
	if err := admin.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL", quoteIdent(schema)).Scan(&existed); err != nil {
		return false, err
	}
	if err := migrate(ctx, admin, schema); err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	if existed {
		var n int64
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+quoteIdent(schema)+".leases").Scan(&n); err != nil {
			return false, err
		}
		if n > 0 {
			return false, fmt.Errorf("schema %s holds %d leases and the suite empties its lease table: pick another --schema", schema, n)
		}
	}
	return !existed, nil
}

// rawPool opens the raw-sql system's pool: the Client's size, the default
// exec mode (cached prepared statements), the server-side timeouts the
// Client sets on its own connections and the same plan_cache_mode.
func rawPool(ctx context.Context, url string, cfg lease.Config, planCacheMode string) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc.MaxConns, pc.MinConns = cfg.MaxConns, 0
	ms := strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	rp := pc.ConnConfig.RuntimeParams
	rp["statement_timeout"] = ms
	rp["lock_timeout"] = ms
	rp["idle_in_transaction_session_timeout"] = ms
	rp["application_name"] = "leasehold-bench-raw"
	if planCacheMode != "" {
		rp["plan_cache_mode"] = planCacheMode
	}
	return pgxpool.NewWithConfig(ctx, pc)
}
