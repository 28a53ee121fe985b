package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgbouncer"
	"github.com/leasehold/leasehold/internal/pgcluster"
)

// fleetClusterSettings are the throwaway server's settings beyond the
// durable defaults: pg_stat_statements loaded, and connections enough for
// 64 members of each system with their pools at pgxpool's default size.
var fleetClusterSettings = map[string]string{
	"shared_preload_libraries":          "pg_stat_statements",
	"max_connections":                   "1000",
	"pg_stat_statements.track_planning": "on",
}

// fleetEnv is the fleet suite's server: a database for each system, the
// statistics it reads, and the systems.
type fleetEnv struct {
	f          fleetFlags
	srv        *suiteServer
	stderr     io.Writer
	statements bool // pg_stat_statements is loaded and readable
	postmaster int  // the server's postmaster pid, 0 when not on this machine
	lh         *lhFleet
	river      *riverFleet
	bouncer    *pgbouncer.Bouncer // with --pgbouncer
}

// openFleetEnv starts a durable throwaway server with pg_stat_statements
// (or uses DATABASE_URL's), creates the systems' databases and finds the
// server's processes. env.srv.undo.run closes and removes all of it.
func openFleetEnv(ctx context.Context, f fleetFlags, stderr io.Writer) (env *fleetEnv, err error) {
	srv, err := openFleetServer(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			srv.undo.run()
		}
	}()
	env = &fleetEnv{f: f, srv: srv, stderr: stderr}
	if env.statements, err = enableStatements(ctx, srv.admin); err != nil {
		return nil, err
	}
	if !env.statements {
		fmt.Fprintln(stderr, "fleet suite: pg_stat_statements is not loaded (shared_preload_libraries); no statement counts")
	}
	if env.postmaster, err = postmasterPID(ctx, srv.admin); err != nil {
		fmt.Fprintf(stderr, "fleet suite: no server CPU: %v\n", err)
	}
	if f.pgbouncer {
		if err := env.startBouncer(ctx); err != nil {
			return nil, err
		}
	}
	if env.lh, err = newLHFleet(ctx, env); err != nil {
		return nil, err
	}
	if env.river, err = newRiverFleet(ctx, env); err != nil {
		return nil, err
	}
	return env, nil
}

// openFleetServer is openSuiteServer for a server with pg_stat_statements
// loaded: DATABASE_URL's, else a durable throwaway cluster started with
// fleetClusterSettings.
func openFleetServer(ctx context.Context) (*suiteServer, error) {
	if os.Getenv(envURL) != "" {
		return openSuiteServer(ctx, false)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(sctx, pgcluster.Config{Durable: true, Settings: fleetClusterSettings})
	if err != nil {
		return nil, fmt.Errorf("start a throwaway PostgreSQL (or set %s): %w", envURL, err)
	}
	s := &suiteServer{url: c.URL("postgres"), undo: undoStack{func() { c.Remove() }},
		where: fmt.Sprintf("throwaway cluster on port %d, durable, pg_stat_statements", c.Port())}
	acfg, err := pgxpool.ParseConfig(s.url)
	if err == nil {
		acfg.MaxConns, acfg.MinConns = 1, 0
		s.admin, err = pgxpool.NewWithConfig(ctx, acfg)
	}
	if err == nil {
		s.undo.push(s.admin.Close)
		err = s.admin.QueryRow(ctx, "SHOW server_version").Scan(&s.version)
	}
	if err == nil {
		s.settings, err = serverDurability(ctx, s.admin)
	}
	if err != nil {
		s.undo.run()
		return nil, err
	}
	return s, nil
}

// enableStatements creates the pg_stat_statements extension in the admin
// database, from which the suite reads every database's statements, when
// the server has the library loaded. It reports whether it has.
func enableStatements(ctx context.Context, admin *pgxpool.Pool) (bool, error) {
	var libs string
	if err := admin.QueryRow(ctx, "SELECT current_setting('shared_preload_libraries')").Scan(&libs); err != nil {
		return false, err
	}
	if !strings.Contains(libs, "pg_stat_statements") {
		return false, nil
	}
	if _, err := admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return false, fmt.Errorf("create extension pg_stat_statements: %w", err)
	}
	return true, nil
}

// systemsOf returns the systems in round order: leasehold first in even
// rounds, River first in odd ones.
func (e *fleetEnv) systemsOf(round int) []fleetSystem {
	if round%2 == 1 {
		return []fleetSystem{e.river, e.lh}
	}
	return []fleetSystem{e.lh, e.river}
}

// systems returns both systems, leasehold first.
func (e *fleetEnv) systems() []fleetSystem { return e.systemsOf(0) }
