package fence_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/internal/pgtest"
)

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
