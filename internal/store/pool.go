package store

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pingIdle is how long a derived pool's connection may stay idle before it
// is pinged when handed out.
const pingIdle = time.Minute

// derivedIdle is how long a derived pool keeps a connection nobody used:
// the connections a burst opened (a start, a rebalance) are closed a
// minute or two after it (pgxpool checks every minute), and an idle
// member keeps what its loops use.
const derivedIdle = time.Minute

// derivedKey is what makes two derived pools the same one.
type derivedKey struct {
	base      *pgxpool.Pool
	maxConns  int32
	timeout   time.Duration
	txPooling bool
}

// derivedPool is a shared derived pool and its users.
type derivedPool struct {
	pool  *pgxpool.Pool
	users int
}

var (
	derivedMu sync.Mutex
	derived   = map[derivedKey]*derivedPool{}
)

// DerivePool returns a pool of at most maxConns connections to the database
// of pool, with the server-side statement_timeout, lock_timeout and
// idle_in_transaction_session_timeout all set to timeout, and
// application_name set to "leasehold" unless pool's configuration names one,
// and plan_cache_mode set to force_generic_plan, and NoticeHook installed
// (in front of pool's own notice handler, if any); a connection is pinged
// before it is handed out only after a minute idle, and closed after a
// minute unused. It does no I/O.
//
// The pools derived from one pool with the same maxConns and timeout are
// one pool, shared: a partition member and its lease client hold one pool,
// not two (issue 26: each pool keeps the connections its bursts opened).
// Call release, once, instead of closing the pool: the last release
// closes it.
//
// With txPooling (pool goes through a pooler in transaction mode, see
// leasehold.Config.TransactionPooling) the pool sends no session settings
// but application_name: the pooler would refuse them, or apply them to
// whichever server connection it hands out. The timeouts are then the
// statements' context deadlines alone.
func DerivePool(pool *pgxpool.Pool, maxConns int32, timeout time.Duration, txPooling bool) (p *pgxpool.Pool, release func(), err error) {
	k := derivedKey{pool, maxConns, timeout, txPooling}
	derivedMu.Lock()
	defer derivedMu.Unlock()
	d := derived[k]
	if d == nil {
		np, err := derivePool(pool, maxConns, timeout, txPooling)
		if err != nil {
			return nil, nil, err
		}
		d = &derivedPool{pool: np}
		derived[k] = d
	}
	d.users++
	var once sync.Once
	return d.pool, func() {
		once.Do(func() {
			derivedMu.Lock()
			d.users--
			last := d.users == 0
			if last && derived[k] == d {
				delete(derived, k)
			}
			derivedMu.Unlock()
			if last {
				d.pool.Close()
			}
		})
	}, nil
}

// ClonePool returns a new pool with pool's configuration (its size, hooks
// and settings), except that a connection unused for idle is closed
// (pgxpool's default keeps one for 30 minutes); a negative idle keeps
// pool's setting. It does no I/O (unless pool keeps MinConns, which the new
// pool opens in the background). A worker runs its queue on one: the
// connections a burst opened (a start, a rebalance, a backlog) do not
// outlive it by half an hour (issue 26).
func ClonePool(pool *pgxpool.Pool, idle time.Duration) (*pgxpool.Pool, error) {
	pc := pool.Config()
	if idle >= 0 {
		pc.MaxConnIdleTime = idle
	}
	p, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("leasehold: open pool: %w", err)
	}
	return p, nil
}

func derivePool(pool *pgxpool.Pool, maxConns int32, timeout time.Duration, txPooling bool) (*pgxpool.Pool, error) {
	pc := pool.Config()
	pc.MaxConns, pc.MinConns, pc.MinIdleConns = maxConns, 0, 0 // no eager dialing
	pc.MaxConnIdleTime = derivedIdle
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
	if txPooling {
		for _, k := range []string{"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "plan_cache_mode"} {
			delete(rp, k)
		}
	}
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
