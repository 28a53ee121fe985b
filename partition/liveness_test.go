package partition_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/history"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/partition"
)

// noPoll is a PollInterval no test below lives long enough to see: what
// these tests measure must happen through notifications and expiry timers.
const noPoll = time.Hour

func startWith(t *testing.T, pool *pgxpool.Pool, cfg partition.Config) *partition.Member {
	t.Helper()
	cfg.Group = "g"
	m, err := partition.New(pgtest.DBOn(t, pool), cfg)
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(pgtest.Context(t)))
	t.Cleanup(func() { stopMember(t, m) })
	return m
}

// runDraining is recorder.run with in-flight work that takes drain to
// finish once ctx is cancelled.
func runDraining(r *recorder, member string, drain time.Duration) func(context.Context, partition.Ownership) {
	return func(ctx context.Context, o partition.Ownership) {
		s := &span{member: member, partition: o.Partition, token: o.Token, start: time.Now()}
		r.mu.Lock()
		r.spans = append(r.spans, s)
		r.mu.Unlock()
		<-ctx.Done()
		time.Sleep(drain)
		r.mu.Lock()
		s.end, s.cause = time.Now(), context.Cause(ctx)
		r.mu.Unlock()
	}
}

// convergeNudged waits for convergence like converged, but NOTIFYs the
// group every 100ms meanwhile, standing in for polling: set-up phases use it
// so that only the phase a test measures runs without polling.
func convergeNudged(t *testing.T, pool *pgxpool.Pool, want []string, within time.Duration) {
	t.Helper()
	ctx, db := pgtest.Context(t), pgtest.DBOn(t, pool)
	var last partition.Status
	for start := time.Now(); time.Since(start) < within; time.Sleep(100 * time.Millisecond) {
		_, err := pool.Exec(ctx, `SELECT pg_notify($1, 'g')`, partition.NotifyChannel(""))
		pgtest.Must(t, err)
		if last, err = partition.Inspect(ctx, db, "g"); err != nil {
			t.Fatal(err)
		}
		if isConverged(last, want) {
			return
		}
	}
	t.Fatalf("not converged to members %v within %v, even nudged: %+v", want, within, last)
}

// A graceful leave converges through notifications alone (the leave's, then
// each release's), well under one TTL, with polling off: nobody waits for a
// lease or a membership to expire. And however long in-flight work takes to
// finish, the next owner's Run starts only after the previous one returned.
func TestGracefulLeaveNeedsNoPollingOrExpiry(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	pgtest.Must(t, history.Install(pgtest.Context(t), pool, ""))
	const (
		n     = 16
		ttl   = 5 * time.Second
		drain = 250 * time.Millisecond
		bound = 2 * time.Second // expect ~drain; a release waiting for expiry takes > ttl - ttl/3
	)
	all, stay := []string{"worker-1", "worker-2", "worker-3"}, []string{"worker-1", "worker-2"}
	// worker-3's partitions go to the others and nothing else moves, so no
	// survivor is woken by a handoff of its own: only notifications help.
	before, _ := partition.Assign(all, n)
	after, _ := partition.Assign(stay, n)
	for p := range before {
		if before[p] != "worker-3" && before[p] != after[p] {
			t.Fatalf("partition %d moves %s → %s when worker-3 leaves: pick another leaver", p, before[p], after[p])
		}
	}
	rec := &recorder{}
	members := map[string]*partition.Member{}
	for _, id := range all {
		members[id] = startWith(t, pool, partition.Config{
			Partitions: n, ID: id, Run: runDraining(rec, id, drain), PollInterval: noPoll,
			Lease: lease.Config{TTL: ttl},
		})
	}
	convergeNudged(t, pool, all, 20*time.Second)

	start := time.Now()
	stopped := make(chan struct{})
	go func() { defer close(stopped); stopMember(t, members["worker-3"]) }()
	converged(t, pool, stay, ttl+2*time.Second)
	leave := time.Since(start)
	<-stopped
	t.Logf("graceful leave with polling off converged in %v (in-flight work: %v)", leave, drain)
	if leave > bound {
		t.Errorf("graceful leave took %v with polling off; want under %v: a notification is missing "+
			"or a release was left to expire", leave, bound)
	}

	byPart := map[int][]span{}
	for _, s := range rec.snapshot() {
		byPart[s.partition] = append(byPart[s.partition], s)
	}
	moved := 0
	for p, ss := range byPart {
		slices.SortFunc(ss, func(a, b span) int { return a.start.Compare(b.start) })
		for i := 1; i < len(ss); i++ {
			prev, cur := ss[i-1], ss[i]
			if prev.end.IsZero() || cur.start.Before(prev.end) {
				t.Errorf("partition %d: %s's Run (token %v) started while %s's (token %v) was still finishing in-flight work",
					p, cur.member, cur.token, prev.member, prev.token)
				continue
			}
			if cur.token <= prev.token {
				t.Errorf("partition %d: token %v after %v", p, cur.token, prev.token)
			}
			if !errors.Is(prev.cause, partition.ErrHandoff) && !errors.Is(prev.cause, partition.ErrStopped) {
				t.Errorf("partition %d: grant ended by %v; want a graceful handoff", p, prev.cause)
			}
			if prev.member == "worker-3" {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("worker-3 handed nothing over: the test proves nothing")
	}
	vs, err := history.Load(pgtest.Context(t), pool, "")
	pgtest.Must(t, err)
	if r := history.Check(vs); !r.OK() || r.Superseded != 0 {
		t.Fatalf("lease history: %+v", r)
	}
}

// A partition whose holder crashed (its lease row outlives it and it is no
// member) is claimed as soon as the lease expires: the member reads the
// expiry and sets a timer. Polling is off, so nothing else would wake it.
func TestCrashedHoldersLeaseIsClaimedAtExpiry(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := pgtest.Context(t)
	var expires time.Time
	pgtest.Must(t, pool.QueryRow(ctx, `
		INSERT INTO leasehold.leases (name, owner, token, acquired_at, renewed_at, expires_at)
		VALUES ($1, 'crashed', nextval('leasehold.lease_token_seq'), clock_timestamp(), clock_timestamp(),
		        clock_timestamp() + interval '1500 milliseconds')
		RETURNING expires_at`, partition.LeaseName("g", 0)).Scan(&expires))
	startWith(t, pool, partition.Config{
		Partitions: 2, ID: "worker-1", Run: (&recorder{}).run("worker-1"), PollInterval: noPoll,
		Lease: lease.Config{TTL: testTTL},
	})
	converged(t, pool, []string{"worker-1"}, 5*time.Second)
	st, err := partition.Inspect(ctx, pgtest.DBOn(t, pool), "g")
	pgtest.Must(t, err)
	lag := st.Partitions[0].Acquired.Sub(expires) // both database times
	t.Logf("claimed %v after the crashed holder's lease expired", lag)
	if lag < 0 || lag > time.Second {
		t.Errorf("partition 0 granted %v after the crashed holder's lease expired; want within 1s", lag)
	}
}

// A grant that comes back after Stop began is given straight back: Run is
// never called for it, the partition is not left held, and Stop is not held
// up waiting for a Run nobody will cancel.
func TestGrantArrivingDuringStopStartsNoRun(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var (
		m        *partition.Member
		once     sync.Once
		hookDone = make(chan struct{})
		stopped  = make(chan error, 1)
		runs     atomic.Int32
	)
	stopMidGrant := func(e lease.AcquireEvent) {
		if len(e.Granted) == 0 {
			return
		}
		once.Do(func() {
			defer close(hookDone)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				stopped <- m.Stop(ctx)
			}()
			// Let Stop begin: it cancels the member at once, then waits
			// for this grant's goroutine. If Stop had not begun, Run would
			// be called and the test fail, not pass vacuously.
			time.Sleep(200 * time.Millisecond)
		})
	}
	m, err := partition.New(pgtest.DBOn(t, pool), partition.Config{
		Group: "g", Partitions: 4, ID: "worker-1", PollInterval: noPoll,
		Run: func(context.Context, partition.Ownership) { runs.Add(1) },
		Lease: lease.Config{TTL: testTTL,
			Hooks: lease.Hooks{OnAcquire: stopMidGrant}},
	})
	pgtest.Must(t, err)
	pgtest.Must(t, m.Start(pgtest.Context(t)))
	t.Cleanup(func() { stopMember(t, m) }) // a no-op once the Stop below returned
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop during a grant: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	<-hookDone // returned before Stop could
	if k := runs.Load(); k != 0 {
		t.Errorf("Run was called %d times for grants that arrived after Stop began", k)
	}
	st, err := partition.Inspect(pgtest.Context(t), pgtest.DBOn(t, pool), "g")
	pgtest.Must(t, err)
	for _, p := range st.Partitions {
		if p.Held {
			t.Errorf("partition %d still held by %s (token %v) after Stop", p.Partition, p.Owner, p.Token)
		}
	}
}
