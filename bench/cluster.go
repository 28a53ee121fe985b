package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// envURL names the variable pointing the benchmarks at an existing server.
const envURL = "DATABASE_URL"

// database returns the URL of the server to benchmark: DATABASE_URL when
// set, otherwise a throwaway cluster that the returned cleanup removes.
// durable keeps the throwaway cluster's fsync, synchronous_commit and
// full_page_writes at PostgreSQL's defaults (on); otherwise they are off.
// (A DATABASE_URL server keeps its own settings; serverDurability reads
// them.) The second result says which server, for the report header.
func database(ctx context.Context, durable bool) (url, where string, cleanup func(), err error) {
	return databaseWith(ctx, durable, nil)
}

// databaseWith is database with extra settings for the throwaway cluster
// (pgcluster.Config.Settings; a DATABASE_URL server keeps its own).
func databaseWith(ctx context.Context, durable bool, settings map[string]string) (url, where string, cleanup func(), err error) {
	if u := os.Getenv(envURL); u != "" {
		return u, envURL, func() {}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(sctx, pgcluster.Config{Durable: durable, Settings: settings})
	if err != nil {
		return "", "", nil, fmt.Errorf("start a throwaway PostgreSQL (or set %s): %w", envURL, err)
	}
	mode := "non-durable (fsync, synchronous_commit, full_page_writes off)"
	if durable {
		mode = "durable (fsync, synchronous_commit, full_page_writes on)"
	}
	return c.URL("postgres"), fmt.Sprintf("throwaway cluster on port %d, %s", c.Port(), mode), func() { c.Remove() }, nil
}

// ServerSettings are the durability settings of the server a run used, as
// the server reported them.
type ServerSettings struct {
	// Durable is true when fsync and full_page_writes are on and
	// synchronous_commit is not off: a commit has reached the disk when
	// the client hears of it.
	Durable bool `json:"durable"`
	// Fsync is the server's fsync setting ("on" or "off").
	Fsync string `json:"fsync"`
	// SynchronousCommit is its synchronous_commit setting ("on", "off",
	// "local", ...).
	SynchronousCommit string `json:"synchronous_commit"`
	// FullPageWrites is its full_page_writes setting.
	FullPageWrites string `json:"full_page_writes"`
}

// Kind is "durable" or "non-durable".
func (s ServerSettings) Kind() string {
	if s.Durable {
		return "durable"
	}
	return "non-durable"
}

// String describes the settings in one phrase, for a report's machine line.
func (s ServerSettings) String() string {
	return fmt.Sprintf("%s (fsync %s, synchronous_commit %s, full_page_writes %s)",
		s.Kind(), s.Fsync, s.SynchronousCommit, s.FullPageWrites)
}

// serverDurability reads the server's durability settings.
func serverDurability(ctx context.Context, db *pgxpool.Pool) (ServerSettings, error) {
	var s ServerSettings
	err := db.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes')`).Scan(&s.Fsync, &s.SynchronousCommit, &s.FullPageWrites)
	if err != nil {
		return s, fmt.Errorf("read the server's durability settings: %w", err)
	}
	s.Durable = s.Fsync == "on" && s.FullPageWrites == "on" && s.SynchronousCommit != "off"
	return s, nil
}

// suiteServer is what a suite that truncates its tables opens first: the
// server (started or given), an admin pool on it, and the clean-ups, run
// last pushed first by undo.run.
type suiteServer struct {
	url, where, version string
	settings            ServerSettings
	admin               *pgxpool.Pool
	undo                undoStack
}

// openSuiteServer starts or connects to the server (durable unless
// nonDurable) and opens a one-connection admin pool on it. On an error,
// what it opened is closed.
func openSuiteServer(ctx context.Context, nonDurable bool) (s *suiteServer, err error) {
	url, where, stop, err := database(ctx, !nonDurable)
	if err != nil {
		return nil, err
	}
	s = &suiteServer{url: url, where: where, undo: undoStack{stop}}
	defer func() {
		if err != nil {
			s.undo.run()
		}
	}()
	acfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	acfg.MaxConns, acfg.MinConns = 1, 0
	if s.admin, err = pgxpool.NewWithConfig(ctx, acfg); err != nil {
		return nil, err
	}
	s.undo.push(s.admin.Close)
	if err := s.admin.QueryRow(ctx, "SHOW server_version").Scan(&s.version); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if s.settings, err = serverDurability(ctx, s.admin); err != nil {
		return nil, err
	}
	return s, nil
}

// createDB creates database name for suite, dropped by undo.run: the
// suites truncate their tables, so they use databases of their own.
func (s *suiteServer) createDB(ctx context.Context, suite, name string, stderr io.Writer) error {
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return fmt.Errorf("create the bench database (the suite truncates its tables, so it uses a database "+
			"of its own; the role needs CREATEDB): %w", err)
	}
	s.undo.push(func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := s.admin.Exec(dctx, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(stderr, "%s: drop database %s: %v\n", suite, name, err)
		}
	})
	return nil
}

// suiteDB creates a database of suite's own (dropped by undo.run, or kept
// when keep), and migrates it. It returns the configuration of pools on
// it, an opener of pools named suite-name whose pools undo.run closes, and
// the control pool ("ctl", 2 connections) that migrated it.
func (s *suiteServer) suiteDB(ctx context.Context, suite string, keep bool, stderr io.Writer) (
	base *pgxpool.Config, pool func(name string, conns int) (*pgxpool.Pool, error), ctl *pgxpool.Pool, err error) {
	dbName := randomName("leasehold_bench_" + suite + "_")
	if keep {
		if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+quoteIdent(dbName)); err != nil {
			return nil, nil, nil, fmt.Errorf("create the bench database: %w", err)
		}
		fmt.Fprintf(stderr, "%s suite: database %s is kept at the end (--keep-db)\n", suite, dbName)
	} else if err := s.createDB(ctx, suite, dbName, stderr); err != nil {
		return nil, nil, nil, err
	}
	if base, err = s.poolConfig(dbName); err != nil {
		return nil, nil, nil, err
	}
	pool = func(name string, conns int) (*pgxpool.Pool, error) {
		p, err := newSystemPool(ctx, base, suite+"-"+name, conns, nil, "")
		if err == nil {
			s.undo.push(p.Close)
		}
		return p, err
	}
	if ctl, err = pool("ctl", 2); err != nil {
		return nil, nil, nil, err
	}
	if err := migrate(ctx, ctl, ""); err != nil {
		return nil, nil, nil, fmt.Errorf("migrate: %w", err)
	}
	return base, pool, ctl, nil
}

// poolConfig returns the configuration of pools on database name.
func (s *suiteServer) poolConfig(name string) (*pgxpool.Config, error) {
	base, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return nil, err
	}
	base.ConnConfig.Database = name
	base.MinConns = 0
	return base, nil
}

// randomName returns prefix followed by 8 random hex digits.
func randomName(prefix string) string {
	var rb [4]byte
	rand.Read(rb[:])
	return prefix + hex.EncodeToString(rb[:])
}
