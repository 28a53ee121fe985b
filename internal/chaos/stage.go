package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgcluster"
)

// stage is the database side of a run, shared by Run (worker processes)
// and Local (in-process members): a server (a throwaway cluster unless one
// is given), its schema dropped and migrated, the lease audit installed and
// the workload set up; check reads back what the run left and checks it.
type stage struct {
	url     string
	pool    *pgxpool.Pool
	cluster *pgcluster.Cluster // nil when the server was given
	env     Env
	wl      Workload
}

// openStage sets a stage up for env (whose Brokers the workload may fill
// in). say reports the steps. On error, whatever was set up is undone.
func openStage(ctx context.Context, url, workload string, env Env, log *slog.Logger, say func(string, ...any)) (_ *stage, err error) {
	wl, err := WorkloadNamed(workload)
	if err != nil {
		return nil, err
	}
	s := &stage{url: url, env: env, wl: wl}
	defer func() {
		if err != nil {
			s.close(ctx)
		}
	}()
	if url == "" {
		say("Starting a throwaway PostgreSQL cluster from the installed server binaries...")
		if s.cluster, err = pgcluster.Start(ctx, pgcluster.Config{}); err != nil {
			return nil, err
		}
		s.url = s.cluster.URL("postgres")
		say("PostgreSQL is up on 127.0.0.1:%d; it is removed at the end.", s.cluster.Port())
	} else {
		say("Using the given server, schema %q (dropped at the start and the end).", env.Schema)
	}
	pc, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return nil, fmt.Errorf("%w: DatabaseURL: %v", ErrInvalidConfig, err)
	}
	pc.ConnConfig.ConnectTimeout = 2 * time.Second
	pc.MaxConns = 8
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("chaos: database: %w", err)
	}
	if err := s.dropSchema(ctx); err != nil {
		return nil, err
	}
	h, err := handle(s.pool, env.Schema, log)
	if err != nil {
		return nil, err
	}
	if err := h.Migrate(ctx); err != nil {
		return nil, err
	}
	if err := history.Install(ctx, s.pool, env.Schema); err != nil {
		return nil, fmt.Errorf("chaos: lease audit: %w", err)
	}
	if err := wl.Setup(ctx, s.pool, &s.env); err != nil {
		return nil, err
	}
	return s, nil
}

// dropSchema drops the stage's schema, if it exists.
func (s *stage) dropSchema(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s.env.Schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("chaos: drop schema %s: %w", s.env.Schema, err)
	}
	return nil
}

// close drops the schema of a given server, and releases the pool, the
// workload and the throwaway cluster.
func (s *stage) close(ctx context.Context) error {
	var err error
	if s.pool != nil {
		if s.cluster == nil {
			err = s.dropSchema(context.WithoutCancel(ctx))
		}
		s.pool.Close()
	}
	s.wl.Close()
	if s.cluster != nil {
		s.cluster.Remove()
	}
	return err
}

// check reads what the run left (the workload's items and ledger, the
// workers' histories in dir, the lease audit) and checks it; confirmed are
// the items whose production was acknowledged. It returns the checker's
// result and the count of torn history lines.
func (s *stage) check(ctx context.Context, confirmed []int64, dir string) (Result, int, error) {
	in, err := s.wl.Collect(ctx, s.pool, s.env)
	if err != nil {
		return Result{}, 0, err
	}
	in.Confirmed = confirmed
	var torn int
	if in.Events, torn, err = ReadEvents(dir); err != nil {
		return Result{}, 0, err
	}
	if in.Audit, err = history.Load(ctx, s.pool, s.env.Schema); err != nil {
		return Result{}, 0, err
	}
	return Check(in), torn, nil
}
