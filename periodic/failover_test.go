package periodic_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/netproxy"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
)

// attempt is one slot transaction in the history.
type attempt struct {
	node  string
	token int64
	slots []periodic.Slot
	err   error
	// leaseBefore is the leader lease's token in the database after the
	// transaction's writes, before its fence check and COMMIT (0 if the
	// transaction failed before its writes). A transaction that commits
	// although the lease had moved past its token by then is a stale
	// leader's commit: the fence check must refuse it.
	leaseBefore int64
}

// history records every slot transaction of every scheduler.
type history struct {
	mu       sync.Mutex
	attempts []attempt
}

func (h *history) add(a attempt) {
	h.mu.Lock()
	h.attempts = append(h.attempts, a)
	h.mu.Unlock()
}

func (h *history) snapshot() []attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.attempts)
}

// checkHistory checks the slot transactions: none committed by a stale
// leader (one whose lease had moved on before its commit), and no slot
// enqueued by two committed transactions.
func checkHistory(as []attempt) error {
	enqueued := make(map[string]int64)
	for _, a := range as {
		if a.err != nil {
			continue
		}
		if a.leaseBefore > a.token {
			return fmt.Errorf("stale commit: %s committed slots %v under token %d after the lease moved to token %d",
				a.node, a.slots, a.token, a.leaseBefore)
		}
		for _, s := range a.slots {
			if s.JobID == 0 {
				continue
			}
			k := fmt.Sprintf("%s@%s", s.Schedule, s.At.Format(time.RFC3339Nano))
			if prev, ok := enqueued[k]; ok {
				return fmt.Errorf("slot %s enqueued twice: jobs %d and %d", k, prev, s.JobID)
			}
			enqueued[k] = s.JobID
		}
	}
	return nil
}

// node is one scheduler of the chaos test, on its own proxied pool.
type node struct {
	id    string
	s     *periodic.Scheduler
	proxy *netproxy.Proxy
}

// chaos runs schedulers on one group through failures and records what
// they did.
type chaos struct {
	t       *testing.T
	ctx     context.Context
	url     string
	admin   *pgxpool.Pool
	scheds  []periodic.Schedule
	noFence bool
	h       history

	mu    sync.Mutex
	nodes []*node
	gen   int

	pause     atomic.Bool  // the next slot transaction pauses
	paused    chan string  // receives the paused attempt's outcome
	refused   atomic.Int64 // attempts refused by the fence
	pauses    int          // pauses done
	leaseName string
}

func newChaos(t *testing.T, noFence bool) *chaos {
	url := pgtest.MigratedURL(t)
	admin := pgtest.PoolURL(t, url)
	ensureGroup(t, pgtest.DBOn(t, admin), "g")
	return &chaos{t: t, ctx: pgtest.Context(t), url: url, admin: admin, noFence: noFence,
		paused: make(chan string, 1), leaseName: periodic.LeasePrefix + "g",
		scheds: []periodic.Schedule{
			{Name: "once", Every: 200 * time.Millisecond, Job: tickJob("once")},
			{Name: "skip", Every: 300 * time.Millisecond, Missed: periodic.MissedSkip, Job: tickJob("skip")},
		}}
}

// lease returns the leader lease's owner and token in the database.
func (c *chaos) lease() (string, int64) {
	var owner string
	var token int64
	err := c.admin.QueryRow(c.ctx, `SELECT owner, token FROM leasehold.leases WHERE name = $1 AND expires_at > clock_timestamp()`,
		c.leaseName).Scan(&owner, &token)
	if err != nil {
		return "", 0
	}
	return owner, token
}

// maxToken returns the leader lease's token, expired or not.
func (c *chaos) maxToken() int64 {
	var token int64
	c.admin.QueryRow(c.ctx, `SELECT token FROM leasehold.leases WHERE name = $1`, c.leaseName).Scan(&token)
	return token
}

// start adds a new scheduler.
func (c *chaos) start() *node {
	t := c.t
	pool, proxy := pgtest.ProxiedPool(t, c.url, func(pc *pgxpool.Config) {
		pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	c.mu.Lock()
	c.gen++
	n := &node{id: fmt.Sprintf("s%d", c.gen), proxy: proxy}
	c.mu.Unlock()
	s, err := periodic.New(pgtest.DBOn(t, pool), periodic.Config{
		Group: "g", Schedules: c.scheds, ID: n.id, Grace: -1, RetryDelay: 50 * time.Millisecond,
		Lease: lease.Config{TTL: time.Second, MaxBackoff: 100 * time.Millisecond},
	})
	pgtest.Must(t, err)
	var before atomic.Int64 // this node's current transaction's leaseBefore
	var paused atomic.Bool  // this node's current transaction was paused
	periodic.SetBeforeCommit(s, func(ctx context.Context, token fence.Token, slots []periodic.Slot) {
		if c.pause.CompareAndSwap(true, false) {
			paused.Store(true)
			// A process pause: no renewal, no progress, until a newer leader
			// holds the lease; then the transaction tries to commit.
			proxy.Blackhole()
			deadline := time.Now().Add(20 * time.Second)
			for c.maxToken() <= int64(token) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			proxy.Heal()
		}
		before.Store(c.maxToken())
	})
	periodic.SetAttempt(s, func(token fence.Token, slots []periodic.Slot, err error) {
		a := attempt{node: n.id, token: int64(token), slots: slices.Clone(slots), err: err, leaseBefore: before.Swap(0)}
		c.h.add(a)
		if errors.Is(err, fence.ErrFenced) {
			c.refused.Add(1)
		}
		if paused.Swap(false) {
			c.paused <- fmt.Sprintf("%s token %d (lease at %d): %v", n.id, token, a.leaseBefore, err)
		}
	})
	if c.noFence {
		periodic.DisableFence(s)
	}
	n.s = s
	pgtest.Must(t, s.Start(c.ctx))
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n
}

// leader waits for a live leader whose token is at least least and that
// has committed a slot transaction, and returns it with its token.
func (c *chaos) leader(least int64) (*node, int64) {
	c.t.Helper()
	var n *node
	var token int64
	waitFor(c.t, 30*time.Second, fmt.Sprintf("a leader with a token of at least %d", least), func() bool {
		owner, tok := c.lease()
		if tok < least || !c.committed(tok) {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, x := range c.nodes {
			if x.id == owner {
				n, token = x, tok
				return true
			}
		}
		return false
	})
	return n, token
}

// committed reports whether a transaction of token committed.
func (c *chaos) committed(token int64) bool {
	for _, a := range c.h.snapshot() {
		if a.token == token && a.err == nil {
			return true
		}
	}
	return false
}

func (c *chaos) remove(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = slices.DeleteFunc(c.nodes, func(x *node) bool { return x == n })
}

// run drives failures until the run-once schedule's records span at least
// slots slots and every kind of failure happened at least twice.
func (c *chaos) run(slots int, kinds []string) {
	t := c.t
	for range 3 {
		c.start()
	}
	_, token := c.leader(1)
	for round := 0; ; round++ {
		rows, err := readSlots(c.ctx, c.admin, "g")
		pgtest.Must(t, err)
		if round >= 2*len(kinds) && c.span(rows) >= slots {
			break
		}
		if round > 100 {
			t.Fatalf("only %d slots after %d rounds", c.span(rows), round)
		}
		var n *node
		n, token = c.leader(token)
		switch kind := kinds[round%len(kinds)]; kind {
		case "pause": // paused past its lease in the middle of a slot transaction
			c.pause.Store(true)
			select {
			case got := <-c.paused:
				t.Logf("round %d: paused leader: %s", round, got)
				c.pauses++
			case <-time.After(30 * time.Second):
				t.Fatal("the paused leader never tried to commit")
			}
		case "cut-off": // cut off from the database past its lease, then back
			n.proxy.Blackhole()
			_, next := c.leader(token + 1)
			n.proxy.Heal()
			t.Logf("round %d: %s cut off, token %d leads", round, n.id, next)
		case "cut": // its connections closed (a commit's reply may be lost) until another leads
			n.proxy.Cut()
			_, next := c.leader(token + 1)
			n.proxy.Heal()
			t.Logf("round %d: %s's connections cut, token %d leads", round, n.id, next)
		case "kill": // stopped without releasing the lease, replaced
			dead, cancel := context.WithCancel(c.ctx)
			cancel()
			n.proxy.Blackhole() // nothing it sends arrives any more
			n.s.Stop(dead)
			c.remove(n)
			c.start()
			t.Logf("round %d: %s killed", round, n.id)
		case "stop": // graceful: the lease is released, another takes over at once
			pgtest.Must(t, n.s.Stop(c.ctx))
			c.remove(n)
			c.start()
			t.Logf("round %d: %s stopped", round, n.id)
		case "all-down": // no leader for a while: slots are missed
			c.mu.Lock()
			nodes := slices.Clone(c.nodes)
			c.mu.Unlock()
			for _, x := range nodes {
				x.proxy.Blackhole()
			}
			waitFor(t, 30*time.Second, "the lease to expire", func() bool { _, tok := c.lease(); return tok == 0 })
			time.Sleep(700 * time.Millisecond) // a few slots pass with no leader (not an assertion on time)
			for _, x := range nodes {
				x.proxy.Heal()
			}
			t.Logf("round %d: no leader for a while", round)
		}
		_, token = c.leader(token + 1)
	}
	// Let the last leader record a few more slots, then stop everyone.
	waitFor(t, 30*time.Second, "slots by the last leader", func() bool {
		n := 0
		for _, a := range c.h.snapshot() {
			if a.token == token && a.err == nil {
				n++
			}
		}
		return n >= 6
	})
	c.mu.Lock()
	nodes := slices.Clone(c.nodes)
	c.mu.Unlock()
	for _, x := range nodes {
		x.proxy.Heal()
		pgtest.Must(t, x.s.Stop(c.ctx))
	}
}

// span returns how many slots of the run-once schedule lie from its first
// record to its last.
func (c *chaos) span(rows []slotRow) int {
	ts := slotTimes(rows, "once", false)
	if len(ts) < 2 {
		return len(ts)
	}
	n, err := periodic.SlotsBetween(c.scheds[0], ts[0], ts[len(ts)-1])
	pgtest.Must(c.t, err)
	return n + 2
}

// records returns the slot records and jobs in the database.
func (c *chaos) records() ([]slotRow, []jobRow) {
	rows, err := readSlots(c.ctx, c.admin, "g")
	pgtest.Must(c.t, err)
	jobs, err := readJobs(c.ctx, c.admin, "g")
	pgtest.Must(c.t, err)
	return rows, jobs
}

// TestFailoverEverySlotOnce runs three schedulers of one group with a 1s
// lease and schedules every 200ms (run once) and 300ms (skip) through
// leaders paused in the middle of a slot transaction past their lease, cut
// off from the database (held, or their connections closed), killed
// without releasing the lease, stopped gracefully, and all of them down at
// once; then checks, by the job rows
// and the slot records, that every slot was enqueued at most once, that
// the slots between the first and last are each enqueued or counted missed
// once, by a new leader only, that tokens never decrease along the slots,
// and, by the history of every slot transaction, that no stale leader
// committed and the paused leaders were refused by the fence. The checkers
// are shown to catch doctored records (a duplicate, a gap, a token going
// back, a stale commit); TestFailoverWithoutFence shows the history check
// catching a real stale commit.
func TestFailoverEverySlotOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	c := newChaos(t, false)
	c.run(30, []string{"pause", "cut-off", "cut", "kill", "stop", "all-down"})
	rows, jobs := c.records()
	as := c.h.snapshot()
	if err := checkRecords(c.scheds, rows, jobs); err != nil {
		t.Fatal(err)
	}
	if err := checkHistory(as); err != nil {
		t.Fatal(err)
	}
	if c.pauses < 2 || c.refused.Load() < int64(c.pauses) {
		t.Fatalf("%d pauses, %d refusals by the fence: each paused leader must be refused", c.pauses, c.refused.Load())
	}
	tokens := map[int64]bool{}
	var collapsed, skipped int
	for _, r := range rows {
		tokens[r.Token] = true
		if r.Missed > 0 && r.JobID != 0 {
			collapsed++
		}
		if r.JobID == 0 {
			skipped++
		}
	}
	t.Logf("%d slots spanned, %d slot records (%d once), %d jobs, %d leaders, %d collapsed catch-ups, %d skipped, %d attempts, %d refused",
		c.span(rows), len(rows), len(slotTimes(rows, "once", false)), len(jobs), len(tokens), collapsed, skipped, len(as), c.refused.Load())
	if len(tokens) < 6 || collapsed == 0 || skipped == 0 {
		t.Fatalf("the failures did not happen: %d leaders, %d collapsed catch-ups, %d skipped slots", len(tokens), collapsed, skipped)
	}

	// Negative controls: the checkers catch doctored records.
	doctor := func(name string, f func(rows []slotRow, jobs []jobRow) ([]slotRow, []jobRow), want string) {
		r, j := f(slices.Clone(rows), slices.Clone(jobs))
		if err := checkRecords(c.scheds, r, j); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checker on records with %s: %v, want an error about %q", name, err, want)
		}
	}
	once := slices.IndexFunc(rows, func(r slotRow) bool { return r.Schedule == "once" && r.JobID != 0 })
	doctor("a duplicate job", func(r []slotRow, j []jobRow) ([]slotRow, []jobRow) {
		dup := j[slices.IndexFunc(j, func(x jobRow) bool { return x.ID == r[once].JobID })]
		dup.ID = 1 << 40
		return r, append(j, dup)
	}, "enqueued 2 times")
	doctor("a gap", func(r []slotRow, j []jobRow) ([]slotRow, []jobRow) {
		gone := r[once+1]
		return slices.Delete(r, once+1, once+2), slices.DeleteFunc(j, func(x jobRow) bool { return x.ID == gone.JobID })
	}, "slots between")
	doctor("a token going back", func(r []slotRow, j []jobRow) ([]slotRow, []jobRow) {
		last := slices.IndexFunc(r, func(x slotRow) bool { return x.Schedule == "once" && x.Token != r[once].Token })
		r[last].Token = r[once].Token - 1
		return r, j
	}, "by token")
	doctor("a leader that missed a slot while it led", func(r []slotRow, j []jobRow) ([]slotRow, []jobRow) {
		for i := 1; i < len(r)-1; i++ {
			if r[i-1].Schedule == "once" && r[i+1].Schedule == "once" &&
				r[i-1].Token == r[i].Token && r[i].Token == r[i+1].Token {
				gone := r[i]
				r[i+1].Missed += gone.Missed + 1
				return slices.Delete(r, i, i+1), slices.DeleteFunc(j, func(x jobRow) bool { return x.ID == gone.JobID })
			}
		}
		t.Fatal("no three consecutive slots by one leader")
		return nil, nil
	}, "which led before it")
	bad := slices.Clone(as)
	for i := range bad {
		if bad[i].err == nil {
			bad[i].leaseBefore = bad[i].token + 1
			break
		}
	}
	if err := checkHistory(bad); err == nil || !strings.Contains(err.Error(), "stale commit") {
		t.Errorf("history checker on a stale commit: %v", err)
	}
	bad = slices.Clone(as)
	for i := range bad {
		if bad[i].err == nil && slices.ContainsFunc(bad[i].slots, func(s periodic.Slot) bool { return s.JobID != 0 }) {
			bad = append(bad, bad[i])
			break
		}
	}
	if err := checkHistory(bad); err == nil || !strings.Contains(err.Error(), "enqueued twice") {
		t.Errorf("history checker on a slot enqueued twice: %v", err)
	}
}

// TestFailoverWithoutFence is the live negative control: with the fence
// check disabled, a leader paused past its lease in the middle of a slot
// transaction commits when it resumes, and the history check catches it.
func TestFailoverWithoutFence(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	c := newChaos(t, true)
	c.run(5, []string{"pause"})
	if err := checkHistory(c.h.snapshot()); err == nil || !strings.Contains(err.Error(), "stale commit") {
		t.Fatalf("without the fence, the history check found: %v; want a stale commit", err)
	}
}
