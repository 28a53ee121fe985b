package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/lograte"
	"github.com/leasehold/leasehold/internal/store"
)

// Client acquires and holds leases for one owner. It renews every lease it
// holds in one statement per RenewInterval and runs its statements on a
// small pool of its own, so renewals never wait behind application queries.
// A Client is safe for concurrent use. Close it when done.
type Client struct {
	cfg       Config
	pool      *pgxpool.Pool
	closePool func() // releases pool (store.DerivePool)
	q         store.LeaseSQL
	st        *store.Statements
	log       *slog.Logger
	fails     *lograte.Limiter // repeated failures: renew, acquire, lost, release, free
	backoff   *backoff.Backoff

	guardMu sync.Mutex  // serialises the token guard of the first grant
	guarded atomic.Bool // the token guard ran: see guard

	// jumpLimit is how much further the wall clock may advance than the
	// monotonic clock before the Client takes the host to have been
	// suspended: SafetyMargin/2. watch is the longest the renewal loop
	// sleeps between two looks at the clock.
	jumpLimit, watch time.Duration

	// Test hooks (export_test.go): loopSlept is called each time the
	// renewal loop has set its timer (with the wait) or exits (with -1);
	// waitingRenew makes the loop renew with the statement that waits for
	// row locks (the behaviour before SKIP LOCKED), for negative controls.
	loopSlept    func(time.Duration)
	waitingRenew bool
	// noWaitingRenew turns off the waiting renewal of busy leases near
	// their deadlines (renewWaiting): a test hook, for the negative control.
	noWaitingRenew bool

	mu       sync.Mutex
	held     map[string]*Lease   // leases this Client holds
	pending  map[string]struct{} // names being acquired right now
	renewing bool                // the renewal goroutine runs
	closed   bool
	stop     chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// New returns a Client for the leases of db. The Client opens its own pool
// (Config.MaxConns connections) from the configuration of db's pool,
// timeouts set to Config.StatementTimeout. New does no I/O.
func New(db *leasehold.DB, cfg Config) (*Client, error) {
	if db.Pool() == nil {
		return nil, &ConfigError{Field: "db", Reason: "nil or zero *leasehold.DB (use leasehold.Open)"}
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := store.For(db.Schema())
	if err != nil {
		return nil, &ConfigError{Field: "db", Reason: err.Error()}
	}
	log := db.Logger().With("owner", cfg.Owner)
	fails, err := lograte.New(log, lograte.Config{Now: cfg.Clock.Now,
		AfterFunc: func(d time.Duration, f func()) { cfg.Clock.AfterFunc(d, f) }})
	if err != nil {
		return nil, &ConfigError{Field: "db", Reason: err.Error()}
	}
	own, release, err := store.DerivePool(db.Pool(), cfg.MaxConns, cfg.StatementTimeout, db.TransactionPooling())
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg:       cfg,
		pool:      own,
		closePool: release,
		q:         st.Lease,
		st:        st,
		log:       log,
		fails:     fails,
		backoff:   backoff.New(cfg.MinBackoff, cfg.MaxBackoff, cfg.Rand),
		// Half the margin: a jump below it leaves the other half for
		// clock-rate differences.
		jumpLimit: cfg.SafetyMargin / 2,
		watch:     max(cfg.SafetyMargin/2, 10*time.Millisecond),
		held:      make(map[string]*Lease),
		pending:   make(map[string]struct{}),
		stop:      make(chan struct{}),
	}, nil
}

// Owner returns this Client's owner id.
func (c *Client) Owner() string { return c.cfg.Owner }

// Config returns the Client's configuration with defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// TryAcquire makes one attempt to acquire the lease name. It returns an
// error wrapping ErrHeld when another owner holds it. When this Client's
// owner already holds the lease in the database (say, after an acquire whose
// reply was lost), the attempt succeeds with a new, higher token, which
// fences anything done under the earlier one. TryAcquire returns an error
// wrapping ErrHeld if this Client already holds name through another *Lease.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	ls, err := c.tryAcquire(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// TryAcquireMany makes one attempt to acquire all names at once, all or
// nothing, locking them in a canonical (sorted) order so that concurrent
// callers cannot deadlock. The leases come back in the order of names.
func (c *Client) TryAcquireMany(ctx context.Context, names ...string) ([]*Lease, error) {
	return c.tryAcquire(ctx, names)
}

// TryAcquireAny makes one attempt to acquire every name in names that is
// free, in one statement, and returns the leases granted, in the order of
// names; held names are skipped, as are names this Client already holds. It
// returns no error when nothing was free.
func (c *Client) TryAcquireAny(ctx context.Context, names ...string) ([]*Lease, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	free, err := c.reserveFree(names)
	if err != nil || len(free) == 0 {
		return nil, err
	}
	return c.acquire(ctx, free, false)
}

// Acquire blocks until it acquires name or ctx ends, retrying with capped
// exponential backoff and full jitter while the lease is held or the
// database is unreachable. Errors that retrying cannot fix (invalid name,
// missing schema, closed Client) return at once. When ctx ends, the error
// wraps both ctx's error and the last attempt's.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	ls, err := c.acquireWait(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// AcquireMany is Acquire for several names at once, all or nothing, as in
// TryAcquireMany.
func (c *Client) AcquireMany(ctx context.Context, names ...string) ([]*Lease, error) {
	return c.acquireWait(ctx, names)
}

func (c *Client) acquireWait(ctx context.Context, names []string) ([]*Lease, error) {
	var prev error // the last attempt that ctx did not cut short
	for attempt := 0; ; attempt++ {
		ls, err := c.tryAcquire(ctx, names)
		if err == nil {
			c.fails.Recovered("acquire", "lease: acquire recovered", "lease", names)
			return ls, nil
		}
		if ctx.Err() != nil {
			// An attempt cut short by ctx (its grant, if any, is released)
			// says less than the attempt before it.
			if prev != nil && (fence.IsIndeterminate(err) || errors.Is(err, ctx.Err())) {
				err = prev
			}
			return nil, fmt.Errorf("lease: acquire %q: %w (last attempt: %w)", names, context.Cause(ctx), err)
		}
		prev = err
		if !transient(err) {
			return nil, err
		}
		if !errors.Is(err, ErrHeld) {
			c.fails.Fail("acquire", "lease: acquire failed, retrying", "lease", names, "attempt", attempt+1, "err", err)
		}
		if werr := c.sleep(ctx, c.backoff.Delay(attempt)); werr != nil {
			return nil, fmt.Errorf("lease: acquire %q: %w (last attempt: %w)", names, werr, err)
		}
	}
}

// stmtCtx bounds one statement on the client side as well: the server's
// statement_timeout cannot end a statement whose packets are lost in a
// partition. The extra half lets the server's own timeout error win the race.
func (c *Client) stmtCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.StatementTimeout*3/2)
}

// rollback ends tx, bounded even when ctx has ended or the network is gone.
func (c *Client) rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.StatementTimeout)
	defer cancel()
	tx.Rollback(ctx)
}

// sleep waits d on the Client's clock, or until ctx ends or the Client closes.
func (c *Client) sleep(ctx context.Context, d time.Duration) error { return c.sleepArmed(ctx, d, nil) }

// sleepArmed is sleep, calling armed (when not nil) once its timer is set.
func (c *Client) sleepArmed(ctx context.Context, d time.Duration, armed func()) error {
	done := make(chan struct{})
	t := c.cfg.Clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	if armed != nil {
		armed()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-c.stop:
		return ErrClosed
	}
}

func checkNames(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%w: no names given", ErrInvalidName)
	}
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		if err := validName(n); err != nil {
			return fmt.Errorf("lease %q: %w", n, err)
		}
		if _, dup := seen[n]; dup {
			return fmt.Errorf("%w: %q given twice", ErrInvalidName, n)
		}
		seen[n] = struct{}{}
	}
	return nil
}

func (c *Client) tryAcquire(ctx context.Context, names []string) ([]*Lease, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	if err := c.reserve(names); err != nil {
		return nil, err
	}
	return c.acquire(ctx, names, true)
}

// acquire grants names, which the caller has reserved (all of them, or
// with all false whichever are free), unreserves them and starts tracking
// the leases granted.
func (c *Client) acquire(ctx context.Context, names []string, all bool) ([]*Lease, error) {
	if err := c.guard(ctx); err != nil {
		c.unreserve(names)
		return nil, err
	}
	sent := read(c.cfg.Clock)
	granted, tokens, acquired, err := c.grant(ctx, names, all)
	now := read(c.cfg.Clock)
	latency := now.mono.Sub(sent.mono)
	if fence.IsIndeterminate(err) {
		c.abandon(names) // unreserves when done
	} else {
		defer c.unreserve(names)
	}
	c.observeAcquire(names, granted, tokens, latency, err)
	if err != nil || len(granted) == 0 {
		return nil, err
	}
	ls := make([]*Lease, len(granted))
	for i, n := range granted {
		ls[i] = newLease(c, n, tokens[i], acquired[i], sent)
	}
	c.checkClock(now) // the leases already held
	late := !now.mono.Before(ls[0].deadline)
	if jump := sent.jump(now); late || jump > c.jumpLimit {
		// The reply came too late to trust, or the host was suspended
		// while it was on its way: give the grant back.
		for _, l := range ls {
			l.Release(context.WithoutCancel(ctx)) // bounded by the statement timeout
		}
		if !late {
			return nil, &SuspendError{Name: fmt.Sprint(granted), Jump: jump, Limit: c.jumpLimit}
		}
		return nil, fmt.Errorf("%w: %q: the grant's reply arrived after its local deadline (%v)", ErrLost, names, latency)
	}
	if err := c.track(ls); err != nil {
		return nil, err
	}
	for _, l := range ls {
		c.log.DebugContext(ctx, "lease: acquired", "lease", l.name, "token", int64(l.token), "latency", latency)
	}
	return ls, nil
}

// grant runs the acquire statement for names and returns the names granted,
// their tokens and database grant times, in the order of names. With all,
// it grants every name or none (ErrHeld); otherwise whichever are free.
//
// The statements run on one connection, watched for the server's warning
// that it stopped waiting for the synchronous standby: a grant committed
// only locally may be lost in a failover, and its token granted again, so
// it is reported as an unknown outcome (store.ErrNotReplicated).
func (c *Client) grant(ctx context.Context, names []string, all bool) ([]string, []fence.Token, []time.Time, error) {
	ctx, cancel := c.stmtCtx(ctx)
	defer cancel()
	label := names[0]
	if len(names) > 1 {
		label = fmt.Sprint(names)
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, nil, classify("acquire", label, err)
	}
	defer conn.Release()
	done := store.Watch(conn.Conn().PgConn())
	granted, tokens, acquired, err := c.grantOn(ctx, conn, names, all, label)
	if nr := done(); err == nil && nr != nil && len(granted) > 0 {
		return nil, nil, nil, &fence.IndeterminateError{Op: "lease: acquire", Resource: label, Err: nr}
	}
	return granted, tokens, acquired, err
}

// grantOn is grant's work, on conn.
func (c *Client) grantOn(ctx context.Context, conn *pgxpool.Conn, names []string, all bool, label string) ([]string, []fence.Token, []time.Time, error) {
	ttl := c.cfg.TTL.Microseconds()
	if len(names) == 1 && all {
		var tok int64
		var name string
		var at, exp time.Time
		err := conn.QueryRow(ctx, c.q.Acquire, names[0], c.cfg.Owner, ttl).Scan(&name, &tok, &at, &exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, nil, fmt.Errorf("%w: %q", ErrHeld, names[0])
		}
		if err != nil {
			return nil, nil, nil, classify("acquire", label, err)
		}
		return names, []fence.Token{fence.Token(tok)}, []time.Time{at}, nil
	}
	var q fence.Querier = conn
	var tx pgx.Tx
	if all {
		var err error
		if tx, err = conn.Begin(ctx); err != nil {
			return nil, nil, nil, classify("acquire", label, err)
		}
		defer c.rollback(ctx, tx)
		q = tx
	}
	rows, err := q.Query(ctx, c.q.AcquireMany, names, c.cfg.Owner, ttl)
	if err != nil {
		return nil, nil, nil, classify("acquire", label, err)
	}
	type row struct {
		tok fence.Token
		at  time.Time
	}
	got := make(map[string]row, len(names))
	for rows.Next() {
		var name string
		var tok int64
		var at, exp time.Time
		if err := rows.Scan(&name, &tok, &at, &exp); err != nil {
			rows.Close()
			return nil, nil, nil, classify("acquire", label, err)
		}
		got[name] = row{fence.Token(tok), at}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, classify("acquire", label, err)
	}
	if all {
		if len(got) < len(names) {
			var busy []string
			for _, n := range names {
				if _, ok := got[n]; !ok {
					busy = append(busy, n)
				}
			}
			return nil, nil, nil, fmt.Errorf("%w: %q", ErrHeld, busy)
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, nil, nil, store.ClassifyCommit("lease", "acquire", label, err)
		}
	}
	granted := make([]string, 0, len(got))
	tokens := make([]fence.Token, 0, len(got))
	acquired := make([]time.Time, 0, len(got))
	for _, n := range names {
		if r, ok := got[n]; ok {
			granted, tokens, acquired = append(granted, n), append(tokens, r.tok), append(acquired, r.at)
		}
	}
	return granted, tokens, acquired, nil
}

// guard runs the token regression guard (store.GuardTokens) before the
// Client's first grant, once per Client: it moves the token sequence past
// every token stored in leasehold's tables (lease rows, queue runs, Kafka
// offsets) if it is behind them, as after a restore, so that no grant of
// this Client carries a token those tables refuse or take for an old one.
// It costs one read of those small tables per Client; it is retried at the
// next acquire if it fails.
func (c *Client) guard(ctx context.Context) error {
	if c.guarded.Load() {
		return nil
	}
	c.guardMu.Lock()
	defer c.guardMu.Unlock()
	if c.guarded.Load() {
		return nil
	}
	return c.guardTokens(ctx, 0)
}

// GuardTokens moves the token sequence forward, if needed, so that the next
// grant (of any client of the schema) carries a token above above and above
// every token stored in leasehold's tables. It never moves the sequence
// back. Every Client runs it (with above 0) before its first grant, unless
// it ran already (a partition member runs it at Start), and DB.Migrate
// runs it too; call it yourself after restoring a backup, or
// after any change that can leave the sequence behind tokens stored
// outside leasehold's tables, with the highest token of your fenced tables
// (fence.Table.MaxToken): see docs/fencing.md. It locks the lease table
// briefly when it moves the sequence.
func (c *Client) GuardTokens(ctx context.Context, above fence.Token) error {
	if above < 0 {
		return &ConfigError{Field: "above", Reason: "negative token"}
	}
	return c.guardTokens(ctx, above)
}

// guardAttempts bounds the tries of the token guard when its statement
// times out.
const guardAttempts = 5

// guardTokens runs the guard. Its statements are bounded by the Client's
// statement timeout (a third of TTL); on a server busy for a moment they
// may time out, which is tried again, up to guardAttempts times within
// ctx: the guard comes before any grant, so waiting costs no lease, and a
// timed-out guard would fail a first acquire (or a member's Start) that a
// moment later succeeds.
func (c *Client) guardTokens(ctx context.Context, above fence.Token) error {
	var raise *store.TokenRaise
	for attempt := 1; ; attempt++ {
		sctx, cancel := c.stmtCtx(ctx)
		var err error
		raise, err = store.GuardTokens(sctx, c.pool, c.st, int64(above), false)
		cancel()
		if err == nil {
			break
		}
		if attempt >= guardAttempts || ctx.Err() != nil || !timedOut(err) {
			return err
		}
		c.log.WarnContext(ctx, "lease: the token guard's statement timed out; trying again", "attempt", attempt, "err", err)
	}
	c.guarded.Store(true) // the first grant's guard is done too
	if raise != nil {
		c.log.WarnContext(ctx, "lease: the token sequence was behind stored tokens; moved it forward",
			"issued", raise.Issued, "stored", raise.Stored, "next_token", raise.Stored+1)
	}
	return nil
}

func (c *Client) observeAcquire(names, granted []string, tokens []fence.Token, latency time.Duration, err error) {
	if f := c.cfg.Hooks.OnAcquire; f != nil {
		f(AcquireEvent{Names: names, Owner: c.cfg.Owner, Granted: granted, Tokens: tokens, Latency: latency, Err: err})
	}
}

// abandon frees, in the background, any grant of names to this owner that
// an acquire with an unknown outcome may have committed: no *Lease holds it,
// so nobody would renew it, and it would block others until it expired. The
// names stay reserved until then, so no new local grant can be hit.
func (c *Client) abandon(names []string) {
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.wg.Add(1)
	}
	c.mu.Unlock()
	if closed {
		c.unreserve(names)
		return
	}
	go func() {
		defer c.wg.Done()
		defer c.unreserve(names)
		ctx, cancel := c.stmtCtx(context.Background())
		defer cancel()
		if _, err := c.pool.Exec(ctx, c.q.ReleaseOrphans, names, c.cfg.Owner); err != nil {
			c.fails.Fail("free", "lease: could not free a grant of unknown outcome; it frees itself at expiry",
				"leases", names, "err", err)
		}
	}()
}

// reserve marks names as being acquired by this Client, refusing names it
// already holds or is acquiring.
func (c *Client) reserve(names []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	for _, n := range names {
		if _, ok := c.held[n]; ok {
			return fmt.Errorf("%w: %q is already held by this client", ErrHeld, n)
		}
		if _, ok := c.pending[n]; ok {
			return fmt.Errorf("%w: %q is being acquired by this client", ErrHeld, n)
		}
	}
	for _, n := range names {
		c.pending[n] = struct{}{}
	}
	return nil
}

// reserveFree reserves, and returns, the names this Client neither holds
// nor is acquiring.
func (c *Client) reserveFree(names []string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	free := make([]string, 0, len(names))
	for _, n := range names {
		_, held := c.held[n]
		_, pending := c.pending[n]
		if !held && !pending {
			free = append(free, n)
			c.pending[n] = struct{}{}
		}
	}
	return free, nil
}

func (c *Client) unreserve(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		delete(c.pending, n)
	}
}

// track registers freshly granted leases for renewal. If the Client was
// closed meanwhile, it releases them and returns ErrClosed.
func (c *Client) track(ls []*Lease) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		for _, l := range ls {
			l.Release(context.Background())
		}
		return ErrClosed
	}
	for _, l := range ls {
		c.held[l.name] = l
	}
	if !c.renewing {
		c.renewing = true
		c.wg.Add(1)
		go c.renewLoop()
	}
	c.mu.Unlock()
	for _, l := range ls {
		l.arm()
	}
	return nil
}

func (c *Client) untrack(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[l.name] == l {
		delete(c.held, l.name)
	}
}

// Held returns the leases this Client currently holds, sorted by name.
func (c *Client) Held() []*Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	ls := make([]*Lease, 0, len(c.held))
	for _, l := range c.held {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *Lease) int { return strings.Compare(a.name, b.name) })
	return ls
}

// Info is a lease row as the database sees it. All times are the database's.
type Info struct {
	Name       string
	Owner      string
	Token      fence.Token
	AcquiredAt time.Time
	RenewedAt  time.Time
	ExpiresAt  time.Time
	// Now is the database's clock_timestamp() when the row was read.
	Now time.Time
}

// Held reports whether the lease was unexpired when read.
func (i Info) Held() bool { return i.ExpiresAt.After(i.Now) }

// Age returns how long the current grant had lasted when read.
func (i Info) Age() time.Duration { return i.Now.Sub(i.AcquiredAt) }

// Inspect reads the lease name from the database. It returns an error
// wrapping ErrNotFound if the lease has never been acquired (or its row was
// deleted by DeleteExpired).
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := validName(name); err != nil {
		return Info{}, err
	}
	ctx, cancel := c.stmtCtx(ctx)
	defer cancel()
	i := Info{Name: name}
	var tok int64
	err := c.pool.QueryRow(ctx, c.q.Inspect, name).Scan(&i.Owner, &tok, &i.AcquiredAt, &i.RenewedAt, &i.ExpiresAt, &i.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Info{}, classifyRead("inspect", name, err)
	}
	i.Token = fence.Token(tok)
	return i, nil
}

// InspectMany reads the leases names from the database, in one statement,
// in the order of names. Names that have no row are left out.
func (c *Client) InspectMany(ctx context.Context, names ...string) ([]Info, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if err := checkNames(names); err != nil {
		return nil, err
	}
	ctx, cancel := c.stmtCtx(ctx)
	defer cancel()
	rows, err := c.pool.Query(ctx, c.q.InspectMany, names)
	if err != nil {
		return nil, classifyRead("inspect", fmt.Sprint(names), err)
	}
	byName := make(map[string]Info, len(names))
	for rows.Next() {
		var i Info
		var tok int64
		if err := rows.Scan(&i.Name, &i.Owner, &tok, &i.AcquiredAt, &i.RenewedAt, &i.ExpiresAt, &i.Now); err != nil {
			rows.Close()
			return nil, classifyRead("inspect", fmt.Sprint(names), err)
		}
		i.Token = fence.Token(tok)
		byName[i.Name] = i
	}
	if err := rows.Err(); err != nil {
		return nil, classifyRead("inspect", fmt.Sprint(names), err)
	}
	out := make([]Info, 0, len(byName))
	for _, n := range names {
		if i, ok := byName[n]; ok {
			out = append(out, i)
		}
	}
	return out, nil
}

// DeleteExpired deletes the rows of leases that expired more than olderThan
// ago and returns how many it deleted. Tokens stay strictly increasing: a
// later grant of a deleted name gets a larger token than any before it. It
// locks the lease table for the length of the delete; if the lock is not
// granted within 50ms (a long transaction holds a lease row), it fails with
// a lock timeout error rather than make every lease statement queue behind
// it: call it again later.
func (c *Client) DeleteExpired(ctx context.Context, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, &ConfigError{Field: "olderThan", Reason: "negative duration"}
	}
	ctx, cancel := c.stmtCtx(ctx)
	defer cancel()
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return 0, classifyRead("delete expired", "", err)
	}
	defer c.rollback(ctx, tx)
	// A queued table lock makes every later acquire, renewal and release
	// wait behind it: give up quickly instead, and let the caller retry.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
		return 0, classifyRead("delete expired", "", err)
	}
	if _, err := tx.Exec(ctx, c.q.LockTable); err != nil {
		return 0, classifyRead("delete expired", "", err)
	}
	tag, err := tx.Exec(ctx, c.q.DeleteExpired, olderThan.Microseconds())
	if err != nil {
		return 0, classifyRead("delete expired", "", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, store.ClassifyCommit("lease", "delete expired", "", err)
	}
	return tag.RowsAffected(), nil
}

// Close releases every lease the Client holds (in parallel, bounded by ctx),
// stops renewing and closes the Client's pool; if ctx ends first, the pool
// closes in the background once the last statement's own timeout ends. A
// closed Client cannot be reused.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.stop)
	held := make([]*Lease, 0, len(c.held))
	for _, l := range c.held {
		held = append(held, l)
	}
	c.mu.Unlock()
	var errs []error
	if err := c.ReleaseMany(ctx, held...); err != nil {
		errs = append(errs, err)
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		c.closePool()
	case <-ctx.Done(): // background statements end by their own timeouts
		errs = append(errs, fmt.Errorf("lease: close: %w", context.Cause(ctx)))
		go func() { <-done; c.closePool() }()
	}
	c.fails.Close()
	return errors.Join(errs...)
}

// timedOut reports whether err is a statement's timeout: the Client's
// deadline, or the server's statement_timeout (SQLSTATE 57014).
func timedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &pe) && pe.Code == "57014"
}
