package pgbouncer_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/internal/pgbouncer"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// The pooler runs in transaction mode: with one server connection, a
// session setting made by one client is seen by another (the server
// connection passed from one to the other between transactions), which is
// why leasehold keeps nothing in sessions behind it. Control: in session
// mode the second client waits for the first one's server connection
// (here: times out), never seeing its setting.
func TestTransactionModeSharesServerConnections(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	dbname := func() string {
		cc, err := pgx.ParseConfig(url)
		pgtest.Must(t, err)
		return cc.Database
	}()
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			ctx := pgtest.Context(t)
			b := pgtest.Bouncer(t, pgbouncer.Config{Server: url, Mode: mode, PoolSize: 1})
			connect := func() *pgx.Conn {
				cc, err := pgx.ParseConfig(b.URL(dbname) + "&default_query_exec_mode=exec")
				pgtest.Must(t, err)
				c, err := pgx.ConnectConfig(ctx, cc)
				pgtest.Must(t, err)
				t.Cleanup(func() { c.Close(context.Background()) })
				return c
			}
			a, other := connect(), connect()
			_, err := a.Exec(ctx, "SET leasehold_test.mark = 'a'")
			pgtest.Must(t, err)
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			var seen *string
			err = other.QueryRow(qctx, "SELECT current_setting('leasehold_test.mark', true)").Scan(&seen)
			switch mode {
			case "transaction":
				if err != nil || seen == nil || *seen != "a" {
					t.Fatalf("the other client saw %v (%v); want \"a\": one server connection, shared", seen, err)
				}
			case "session":
				if err == nil && seen != nil && *seen == "a" {
					t.Fatal("in session mode the other client saw the first one's setting")
				}
			}
		})
	}
}
