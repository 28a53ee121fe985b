package partition_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

const (
	envURL = "LEASEHOLD_PARTITION_CHILD_URL"
	envID  = "LEASEHOLD_PARTITION_CHILD_ID"
	nProc  = 12 // partitions in the multi-process test
)

// act is one fenced effect: it applies only if no later token has written
// the partition's row, and logs whether it applied.
const act = `
WITH u AS (
    UPDATE acts SET token = $2, owner = $3, n = n + 1 WHERE partition = $1 AND token <= $2 RETURNING 1)
INSERT INTO act_log (owner, partition, token, accepted) SELECT $3, $1, $2, EXISTS (SELECT FROM u)`

// TestMemberProcess is the body of the member processes started by
// TestProcessesCrashAndPause; it does nothing when run directly.
func TestMemberProcess(t *testing.T) {
	url, id := os.Getenv(envURL), os.Getenv(envID)
	if url == "" {
		t.Skip("run by TestProcessesCrashAndPause")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool := pgtest.PoolURL(t, url)
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{
		Group: "g", Partitions: nProc, ID: id,
		Lease: lease.Config{TTL: testTTL},
		Run: func(ctx context.Context, o partition.Ownership) {
			fmt.Printf("OWN %d %d\n", o.Partition, o.Token)
			for ctx.Err() == nil {
				if _, err := pool.Exec(context.Background(), act, o.Partition, int64(o.Token), id); err != nil {
					fmt.Printf("ACTERR %v\n", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			fmt.Printf("END %d %d %v\n", o.Partition, o.Token, context.Cause(ctx))
		},
	})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(ctx))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pgtest.Must(t, m.Stop(sctx))
}

type proc struct {
	id  string
	cmd *exec.Cmd
	out *strings.Builder
}

func startProcess(t *testing.T, url, id string) *proc {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemberProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envURL+"="+url, envID+"="+id)
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	pgtest.Must(t, cmd.Start())
	p := &proc{id: id, cmd: cmd, out: out}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p
}

func TestProcessesCrashAndPause(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process failover")
	}
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	pool := pgtest.PoolURL(t, url)
	pgtest.Must(t, history.Install(ctx, pool, ""))
	_, err := pool.Exec(ctx, `
		CREATE TABLE acts (partition int PRIMARY KEY, token bigint NOT NULL DEFAULT 0, owner text, n bigint NOT NULL DEFAULT 0);
		INSERT INTO acts (partition) SELECT generate_series(0, 11);
		CREATE TABLE act_log (seq bigserial PRIMARY KEY, owner text, partition int, token bigint, accepted bool,
			at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	pgtest.Must(t, err)

	procs := []*proc{startProcess(t, url, "proc-0"), startProcess(t, url, "proc-1"), startProcess(t, url, "proc-2")}
	converged(t, pool, []string{"proc-0", "proc-1", "proc-2"}, 30*time.Second)

	// kill -9: the crashed member's partitions are owned again once its
	// leases expire: within TTL plus one renew interval.
	pgtest.Must(t, procs[0].cmd.Process.Signal(syscall.SIGKILL))
	failover := converged(t, pool, []string{"proc-1", "proc-2"}, 15*time.Second)
	bound := testTTL + testTTL/3
	t.Logf("crash failover: %v (bound: TTL + renew interval = %v)", failover, bound)
	if failover > bound+time.Second { // a second of slack for a loaded CI machine
		t.Errorf("crash failover took %v; want within %v", failover, bound)
	}

	// SIGSTOP past the TTL: the others take its partitions; on SIGCONT it
	// learns it lost them, and its stale writes are refused.
	before := ownedBy(t, pool, "proc-1")
	pgtest.Must(t, procs[1].cmd.Process.Signal(syscall.SIGSTOP))
	converged(t, pool, []string{"proc-2"}, 15*time.Second)
	pgtest.Must(t, procs[1].cmd.Process.Signal(syscall.SIGCONT))
	rejoin := converged(t, pool, []string{"proc-1", "proc-2"}, 15*time.Second)
	t.Logf("paused member rejoined and the group converged %v after SIGCONT", rejoin)

	for _, p := range procs[1:] {
		pgtest.Must(t, p.cmd.Process.Signal(syscall.SIGTERM))
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", p.id, err, p.out)
		}
	}

	// The paused member learned, on resuming, that it lost every partition
	// it held before the pause.
	out := procs[1].out.String()
	for part, tok := range before {
		if !strings.Contains(out, fmt.Sprintf("END %d %d lease: lost", part, tok)) {
			t.Errorf("proc-1 never learned it lost partition %d (token %d):\n%s", part, tok, out)
		}
	}
	if len(before) == 0 {
		t.Fatal("proc-1 owned nothing before the pause: the test proves nothing")
	}
	// Per partition, accepted effects carry non-decreasing tokens: no stale
	// owner's write landed after a newer owner's.
	var stale int
	pgtest.Must(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM act_log a
		WHERE a.accepted AND EXISTS (
			SELECT FROM act_log b WHERE b.accepted AND b.partition = a.partition AND b.seq < a.seq AND b.token > a.token)`).Scan(&stale))
	var refused int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT count(*) FROM act_log WHERE NOT accepted`).Scan(&refused))
	t.Logf("stale writes accepted: %d, refused: %d", stale, refused)
	if stale != 0 {
		t.Fatalf("%d stale effects were accepted", stale)
	}

	vs, err := history.Load(ctx, pool, "")
	pgtest.Must(t, err)
	if r := history.Check(vs); !r.OK() {
		t.Fatalf("lease history violations: %v", r.Violations)
	}
	// Negative control on the same pipeline: a grant behind the protocol's
	// back must be reported as an overlap.
	_, err = pool.Exec(ctx, `UPDATE leasehold.leases SET owner = 'intruder', token = nextval('leasehold.lease_token_seq'),
		acquired_at = clock_timestamp() - interval '1 hour' WHERE name = 'partition/g/0'`)
	pgtest.Must(t, err)
	vs, err = history.Load(ctx, pool, "")
	pgtest.Must(t, err)
	if r := history.Check(vs); r.OK() {
		t.Fatal("the history checker missed a deliberate overlap")
	}
}

// ownedBy returns the partitions member holds, with their tokens.
func ownedBy(t *testing.T, pool *pgxpool.Pool, member string) map[int]int64 {
	st, err := partition.Inspect(pgtest.Context(t), pgtest.DBOn(t, pool), "g")
	pgtest.Must(t, err)
	out := map[int]int64{}
	for _, p := range st.Partitions {
		if p.Held && p.Owner == member {
			out[p.Partition] = int64(p.Token)
		}
	}
	return out
}
