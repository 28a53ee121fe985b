package main

import (
	"context"
	"fmt"
	"net"
	neturl "net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgbouncer"
)

// fleetBouncerPool is the server connections the pooler keeps per
// database with --pgbouncer (PgBouncer's default_pool_size).
const fleetBouncerPool = 50

// startBouncer starts the PgBouncer in transaction mode that both
// systems' workers connect through with --pgbouncer, removed with the
// suite's server.
func (e *fleetEnv) startBouncer(ctx context.Context) error {
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{Server: e.srv.url, PoolSize: fleetBouncerPool})
	if err != nil {
		return fmt.Errorf("--pgbouncer: %w", err)
	}
	e.srv.undo.push(func() { b.Remove() })
	e.bouncer = b
	return nil
}

// viaBouncer returns a copy of pc that connects through the pooler and
// prepares no named statements (PgBouncer 1.18 in transaction mode cannot
// keep them), or pc itself without --pgbouncer.
func (e *fleetEnv) viaBouncer(pc *pgxpool.Config) *pgxpool.Config {
	if e.bouncer == nil {
		return pc
	}
	pc = pc.Copy()
	host, port, _ := net.SplitHostPort(e.bouncer.Addr())
	p, _ := strconv.Atoi(port)
	pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Fallbacks = host, uint16(p), nil
	pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	return pc
}

// bouncerSettings describes --pgbouncer for the report's settings line.
func (e *fleetEnv) bouncerSettings() string {
	if e.bouncer == nil {
		return ""
	}
	return fmt.Sprintf("; workers through PgBouncer 1.18 in transaction mode (%d server connections per database; "+
		"leasehold with TransactionPooling and a direct LISTEN session per worker, River with PollOnly)", fleetBouncerPool)
}

// withParam returns the connection string u with the parameter key set to
// value (u a URL or key=value pairs).
func withParam(u, key, value string) string {
	pu, err := neturl.Parse(u)
	if err != nil || (pu.Scheme != "postgres" && pu.Scheme != "postgresql") {
		return u + " " + key + "=" + value
	}
	q := pu.Query()
	q.Set(key, value)
	pu.RawQuery = q.Encode()
	return pu.String()
}
