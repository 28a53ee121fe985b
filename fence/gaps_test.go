package fence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// A token is only good for the lease that granted it: tokens come from one
// sequence, so another lease's (larger) token must not pass the check.
func TestCheckRefusesATokenOfAnotherLease(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, f := setup(t)
	c := client(t, pool, "a", nil)
	l1, err := c.TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	l2, err := c.TryAcquire(ctx, "p/2")
	pgtest.Must(t, err)
	if l2.Token() <= l1.Token() {
		t.Fatalf("tokens %v then %v; want increasing", l1.Token(), l2.Token())
	}
	err = f.Tx(ctx, pool, "p/1", l2.Token(), effect(l2.Token(), "wrong lease"))
	var fe *fence.FencedError
	if !errors.As(err, &fe) || fe.Current != l1.Token() || fe.Held != l2.Token() {
		t.Fatalf("effect on p/1 with p/2's token = %v; want *FencedError held %v current %v", err, l2.Token(), l1.Token())
	}
	if n := count(t, pool, l2.Token()); n != 0 {
		t.Fatalf("%d effects committed with another lease's token; want 0", n)
	}
}

// Tx promises that fn is not called when Check refuses.
func TestTxDoesNotCallFnWhenCheckRefuses(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, f := setup(t)
	la, err := client(t, pool, "a", fakeclock.New(time.Now())).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	lb, err := client(t, pool, "b", nil).Acquire(ctx, "p/1") // waits out a's frozen lease
	pgtest.Must(t, err)
	for _, c := range []struct {
		lease string
		tok   fence.Token
	}{{"p/1", la.Token()}, {"no/such", lb.Token()}} {
		called := false
		err := f.Tx(ctx, pool, c.lease, c.tok, func(pgx.Tx) error { called = true; return nil })
		if !errors.Is(err, fence.ErrFenced) || called {
			t.Fatalf("Tx(%s, %v) = %v, fn called = %v; want ErrFenced and fn not called", c.lease, c.tok, err, called)
		}
	}
}

// IdleTimeout: a holder that stalls inside an open effect transaction is cut
// off by the server, so a takeover does not wait for it, and the stalled
// transaction cannot commit afterwards.
func TestIdleTimeoutCutsOffAStalledEffectTransaction(t *testing.T) {
	t.Parallel()
	f, err := fence.NewPostgres(fence.PostgresConfig{IdleTimeout: 300 * time.Millisecond})
	pgtest.Must(t, err)
	if during, aOK := takeoverDuringOpenEffect(t, f.Check); !during || aOK {
		t.Fatalf("IdleTimeout 300ms, A idle 1.1s: takeover during the effect = %v, A committed = %v; want true, false", during, aOK)
	}
}

// LockTimeout bounds Check's wait for the lease row's lock.
func TestLockTimeoutBoundsTheCheck(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool, _ := setup(t)
	f, err := fence.NewPostgres(fence.PostgresConfig{LockTimeout: 200 * time.Millisecond})
	pgtest.Must(t, err)
	la, err := client(t, pool, "a", nil).TryAcquire(ctx, "p/1")
	pgtest.Must(t, err)
	blocker, err := pool.Begin(ctx) // holds the row lock a renewal or takeover takes
	pgtest.Must(t, err)
	defer blocker.Rollback(ctx)
	_, err = blocker.Exec(ctx, `SELECT 1 FROM leasehold.leases WHERE name = 'p/1' FOR NO KEY UPDATE`)
	pgtest.Must(t, err)

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	called := false
	err = f.Tx(cctx, pool, "p/1", la.Token(), func(pgx.Tx) error { called = true; return nil })
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "55P03" || called || took > 3*time.Second {
		t.Fatalf("Tx against a locked lease row = %v after %v (fn called %v); want lock_not_available (55P03) after ~200ms",
			err, took, called)
	}
}

// Middleware refuses without running the handler: a refused request must
// have no effect.
func TestMiddlewareDoesNotRunTheHandlerForARefusedRequest(t *testing.T) {
	t.Parallel()
	var hw fence.HighWater
	var ran atomic.Int32
	srv := httptest.NewServer(hw.Middleware(func(r *http.Request) string { return r.URL.Path },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1); io.WriteString(w, "applied") })))
	defer srv.Close()
	send := func(tok fence.Token) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders/7", nil)
		if tok != 0 {
			fence.SetHeader(req.Header, tok)
		}
		resp, err := http.DefaultClient.Do(req)
		pgtest.Must(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := send(6); code != http.StatusOK || ran.Load() != 1 {
		t.Fatalf("token 6: status %d, handler runs %d; want 200, 1", code, ran.Load())
	}
	for _, tok := range []fence.Token{5, 0} {
		code, body := send(tok)
		if code == http.StatusOK || ran.Load() != 1 || strings.Contains(body, "applied") {
			t.Fatalf("token %v: status %d, body %q, handler runs %d; want refused and the handler not run", tok, code, body, ran.Load())
		}
	}
}

// A 409 without CurrentHeader is an ordinary conflict, not a fence refusal.
func TestCheckResponseTreatsA409WithoutCurrentTokenAsAConflict(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fenced" {
			w.Header().Set(fence.CurrentHeader, "9")
		}
		http.Error(w, "conflict", http.StatusConflict)
	}))
	defer srv.Close()
	get := func(path string) *http.Response {
		resp, err := http.Get(srv.URL + path)
		pgtest.Must(t, err)
		resp.Body.Close()
		return resp
	}
	if err := fence.CheckResponse(get("/plain"), "/plain", 7); err != nil {
		t.Fatalf("409 without %s: CheckResponse = %v; want nil (an ordinary conflict)", fence.CurrentHeader, err)
	}
	var fe *fence.FencedError
	if err := fence.CheckResponse(get("/fenced"), "/fenced", 7); !errors.As(err, &fe) || fe.Current != 9 || fe.Held != 7 {
		t.Fatalf("409 with %s: 9: CheckResponse = %v; want *FencedError held 7 current 9", fence.CurrentHeader, err)
	}
}
