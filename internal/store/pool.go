package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pingIdle is how long a derived pool's connection may stay idle before it
// is pinged when handed out.
const pingIdle = time.Minute

// DerivePool opens a new pool of at most maxConns connections to the database
// of pool, with the server-side statement_timeout, lock_timeout and
// idle_in_transaction_session_timeout all set to timeout, and
// application_name set to "leasehold" unless pool's configuration names one,
// and plan_cache_mode set to force_generic_plan, and NoticeHook installed
// (in front of pool's own notice handler, if any); a connection is pinged
// before it is handed out only after a minute idle. It does no I/O.
func DerivePool(pool *pgxpool.Pool, maxConns int32, timeout time.Duration) (*pgxpool.Pool, error) {
	pc := pool.Config()
	pc.MaxConns, pc.MinConns, pc.MinIdleConns = maxConns, 0, 0 // no eager dialing
	ms := strconv.FormatInt(timeout.Milliseconds(), 10)
	rp := pc.ConnConfig.RuntimeParams
	rp["statement_timeout"] = ms
	rp["lock_timeout"] = ms
	rp["idle_in_transaction_session_timeout"] = ms
	if rp["application_name"] == "" {
		rp["application_name"] = "leasehold"
	}
	// Our statements are short and index-driven; under the default plan
	// cache mode each connection flips between custom and generic plans
	// after its fifth execution, which measurably halved renew throughput
	// on some connections (bench/README.md).
	rp["plan_cache_mode"] = "force_generic_plan"
	// Grants on this pool must not take a commit the synchronous standby
	// did not confirm for success: the hook records the warning for the
	// commits that are watched (Watch). Renewals and heartbeats are not
	// watched: an unreplicated renewal can move a local deadline past what
	// a failed-over standby has (docs/reliability.md); fenced writes stay
	// safe, since the new primary's token check refuses the old grant.
	pc.ConnConfig.OnNotice = NoticeHook(pc.ConnConfig.OnNotice)
	// pgxpool pings a connection idle for over a second before handing it
	// out: for a member's loops, which run a statement every second or so,
	// that was a round trip (and a transaction) more for each of them. A
	// connection that died meanwhile fails its statement instead, which
	// the loops retry on a fresh one.
	pc.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > pingIdle }
	p, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("leasehold: open pool: %w", err)
	}
	return p, nil
}
