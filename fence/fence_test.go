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

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
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
