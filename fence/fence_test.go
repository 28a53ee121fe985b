package fence_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func client(t *testing.T, pool *pgxpool.Pool, owner string, clock lease.Clock) *lease.Client {
	c, err := lease.New(pool, lease.Config{Owner: owner, TTL: time.Second, Clock: clock,
		MaxBackoff: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	pgtest.Must(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func setup(t *testing.T) (*pgxpool.Pool, *fence.Postgres) {
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctxT(t), `CREATE TABLE effects (token bigint NOT NULL, note text)`)
	pgtest.Must(t, err)
	f, err := fence.NewPostgres(fence.PostgresConfig{})
	pgtest.Must(t, err)
	return pool, f
}

func effect(token fence.Token, note string) func(pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO effects VALUES ($1, $2)`, int64(token), note)
		return err
	}
}

func count(t *testing.T, pool *pgxpool.Pool, token fence.Token) int {
	var n int
	pgtest.Must(t, pool.QueryRow(ctxT(t), `SELECT count(*) FROM effects WHERE token = $1`, int64(token)).Scan(&n))
	return n
}

func TestPostgresTxCommitsOnlyWhileTheLeaseCarriesTheToken(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, f := setup(t)
	frozen := fakeclock.New(time.Now()) // A pauses: never renews
	la, err := client(t, pool, "a", frozen).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	pgtest.Must(t, f.Tx(ctx, pool, "p/1", la.Token(), effect(la.Token(), "a while current")))

	// The lease expires in the database; nobody has taken it yet.
	time.Sleep(1100 * time.Millisecond)
	err = f.Tx(ctx, pool, "p/1", la.Token(), effect(la.Token(), "a after expiry"))
	var fe *fence.FencedError
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &fe) || !strings.Contains(fe.Reason, "expired") {
		t.Fatalf("effect after expiry = %v; want ErrFenced (expired)", err)
	}

	lb, err := client(t, pool, "b", nil).Acquire(ctx, "p/1")
	pgtest.Must(t, err)
	err = f.Tx(ctx, pool, "p/1", la.Token(), effect(la.Token(), "a after takeover"))
	if !errors.As(err, &fe) || fe.Current != lb.Token() || fe.Held != la.Token() {
		t.Fatalf("stale effect = %v; want *FencedError held %v current %v", err, la.Token(), lb.Token())
	}
	pgtest.Must(t, f.Tx(ctx, pool, "p/1", lb.Token(), effect(lb.Token(), "b")))
	if a, b := count(t, pool, la.Token()), count(t, pool, lb.Token()); a != 1 || b != 1 {
		t.Fatalf("effects: %d by a, %d by b; want exactly 1 each", a, b)
	}
	if err := f.Tx(ctx, pool, "no/such", 1, effect(1, "x")); !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("effect under an unknown lease = %v; want ErrFenced", err)
	}
	// An error from fn rolls back and comes back unchanged.
	boom := errors.New("boom")
	if err := f.Tx(ctx, pool, "p/1", lb.Token(), func(tx pgx.Tx) error { effect(lb.Token(), "rolled back")(tx); return boom }); err != boom {
		t.Fatalf("Tx with failing fn = %v; want boom", err)
	}
	if count(t, pool, lb.Token()) != 1 {
		t.Fatal("a failed fn's effect was committed")
	}
}

// takeoverDuringOpenEffect opens an effect transaction for holder A with
// check, lets A's lease expire, starts B's acquire, and reports whether B's
// takeover committed while A's effect transaction was still open, then
// commits A's transaction.
func takeoverDuringOpenEffect(t *testing.T, check func(context.Context, pgx.Tx, string, fence.Token) error) (committedWhileOpen, aCommitted bool) {
	ctx := ctxT(t)
	pool, _ := setup(t)
	la, err := client(t, pool, "a", fakeclock.New(time.Now())).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	pgtest.Must(t, check(ctx, tx, "p/1", la.Token()))
	pgtest.Must(t, effect(la.Token(), "a")(tx))

	time.Sleep(1100 * time.Millisecond) // A's lease expires; A's transaction is still open
	got := make(chan error, 1)
	go func() {
		_, err := client(t, pool, "b", nil).Acquire(ctx, "p/1") // each attempt waits at most StatementTimeout
		got <- err
	}()
	select {
	case err := <-got:
		pgtest.Must(t, err)
		committedWhileOpen = true
	case <-time.After(500 * time.Millisecond):
	}
	aCommitted = tx.Commit(ctx) == nil && count(t, pool, la.Token()) == 1
	if !committedWhileOpen {
		pgtest.Must(t, <-got) // B gets it once A's transaction has ended
	}
	return committedWhileOpen, aCommitted
}

// The READ COMMITTED hole: with Postgres.Check a takeover cannot commit
// while an effect transaction is open, so effects and grants stay in token
// order. The negative controls show that the test catches the hole: with a
// plain check, or FOR KEY SHARE, the takeover commits while A's transaction
// is open, and A then commits too.
func TestTakeoverCannotCommitWhileAnEffectTransactionIsOpen(t *testing.T) {
	t.Parallel()
	f, err := fence.NewPostgres(fence.PostgresConfig{})
	pgtest.Must(t, err)
	if during, aOK := takeoverDuringOpenEffect(t, f.Check); during || !aOK {
		t.Fatalf("with Postgres.Check: takeover committed during the effect = %v, A committed = %v; want false, true", during, aOK)
	}
	naive := func(lock string) func(context.Context, pgx.Tx, string, fence.Token) error {
		return func(ctx context.Context, tx pgx.Tx, name string, tok fence.Token) error {
			var cur int64
			if err := tx.QueryRow(ctx, `SELECT token FROM leasehold.leases WHERE name = $1 `+lock, name).Scan(&cur); err != nil {
				return err
			}
			if fence.Token(cur) != tok {
				return fence.ErrFenced
			}
			return nil
		}
	}
	for _, lock := range []string{"", "FOR KEY SHARE"} {
		if during, aOK := takeoverDuringOpenEffect(t, naive(lock)); !during || !aOK {
			t.Fatalf("negative control (check %q): takeover during the effect = %v, A committed = %v; want true, true (the hole)",
				lock, during, aOK)
		}
	}
}

func TestTableUpdateIsAConditionalWriteOnTheTarget(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool := pgtest.Pool(t)
	_, err := pool.Exec(ctx, `CREATE SCHEMA app; CREATE TABLE app.accounts (id int PRIMARY KEY, balance int NOT NULL,
		fence_token bigint NOT NULL DEFAULT 0); INSERT INTO app.accounts VALUES (1, 0)`)
	pgtest.Must(t, err)
	tbl := fence.Table{Name: "app.accounts", KeyColumn: "id", TokenColumn: "fence_token"}
	pgtest.Must(t, tbl.Update(ctx, pool, 1, 5, "balance = balance + $3", 10))
	pgtest.Must(t, tbl.Update(ctx, pool, 1, 5, "balance = balance + $3", 1)) // same holder again
	err = tbl.Update(ctx, pool, 1, 3, "balance = balance + $3", 100)
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Current != 5 || fe.Held != 3 {
		t.Fatalf("stale update = %v; want *FencedError held 3 current 5", err)
	}
	var balance int
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT balance FROM app.accounts WHERE id = 1`).Scan(&balance))
	if balance != 11 {
		t.Fatalf("balance = %d; want 11 (the stale +100 refused)", balance)
	}
	if err := tbl.Update(ctx, pool, 2, 9, "balance = 0"); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("update of a missing row = %v; want pgx.ErrNoRows", err)
	}
	if err := (fence.Table{Name: "x"}).Update(ctx, pool, 1, 1, "a = 1"); err == nil {
		t.Fatal("Table without columns must fail")
	}
}

func TestHTTPCarriesTokensAndRefusesStaleOnes(t *testing.T) {
	t.Parallel()
	var hw fence.HighWater
	srv := httptest.NewServer(hw.Middleware(func(r *http.Request) string { return r.URL.Path },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "applied") })))
	defer srv.Close()
	send := func(tok fence.Token) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders/7", nil)
		if tok != 0 {
			fence.SetHeader(req.Header, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	for _, tok := range []fence.Token{5, 5, 6} {
		resp, err := send(tok)
		pgtest.Must(t, err)
		if resp.StatusCode != http.StatusOK || fence.CheckResponse(resp, "/orders/7", tok) != nil {
			t.Fatalf("token %v: status %d; want 200", tok, resp.StatusCode)
		}
	}
	resp, err := send(4)
	pgtest.Must(t, err)
	var fe *fence.FencedError
	if err := fence.CheckResponse(resp, "/orders/7", 4); !errors.As(err, &fe) || fe.Current != 6 {
		t.Fatalf("stale request: status %d, CheckResponse = %v; want *FencedError current 6", resp.StatusCode, err)
	}
	if resp, _ := send(0); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("request without a token: status %d; want 400", resp.StatusCode)
	}
	if _, err := fence.FromHeader(http.Header{fence.Header: {"-3"}}); err == nil {
		t.Fatal("FromHeader(-3) must fail")
	}
}

func TestUnfencedIsLoud(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ran := false
	err := fence.Unfenced(context.Background(), log, "s3://bucket/report.csv", 42, "object store has no conditional writes here",
		func(context.Context) error { ran = true; return nil })
	if err != nil || !ran {
		t.Fatalf("Unfenced = %v, ran %v", err, ran)
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "UNFENCED") ||
		!strings.Contains(out, "token=42") || !strings.Contains(out, "report.csv") {
		t.Fatalf("log = %q; want a warning naming the resource and token", out)
	}
}

func TestNewPostgresRejectsBadConfig(t *testing.T) {
	for _, cfg := range []fence.PostgresConfig{
		{Schema: "bad schema"}, {LockTimeout: -1}, {IdleTimeout: -1}, {StatementTimeout: -1},
	} {
		if _, err := fence.NewPostgres(cfg); err == nil {
			t.Errorf("NewPostgres(%+v) = nil error; want one", cfg)
		}
	}
}
