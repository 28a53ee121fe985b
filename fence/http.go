package fence

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// Header carries a fencing token on an HTTP request. A server that
// supports fencing refuses a request whose token is lower than the highest
// it has accepted for the same resource, with StatusFenced and the current
// token in CurrentHeader.
const (
	Header        = "Leasehold-Fencing-Token"
	CurrentHeader = "Leasehold-Current-Token"
	// StatusFenced is the status of a refused request: 409 Conflict.
	StatusFenced = http.StatusConflict
)

// SetHeader puts t on the request headers h.
func SetHeader(h http.Header, t Token) { h.Set(Header, t.String()) }

// FromHeader reads a token from request headers. It returns an error when
// the header is missing or not a positive integer.
func FromHeader(h http.Header) (Token, error) {
	v := h.Get(Header)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("fence: header %s = %q: not a fencing token", Header, v)
	}
	return Token(n), nil
}

// CheckResponse interprets a fencing server's reply to a request that
// carried held: a *FencedError for StatusFenced, nil otherwise. A 409 that
// does not carry CurrentHeader is an ordinary conflict, not a fence refusal.
func CheckResponse(resp *http.Response, resource string, held Token) error {
	if resp.StatusCode != StatusFenced || resp.Header.Get(CurrentHeader) == "" {
		return nil
	}
	cur, _ := strconv.ParseInt(resp.Header.Get(CurrentHeader), 10, 64)
	return &FencedError{Resource: resource, Held: held, Current: Token(cur), Reason: "refused by the server"}
}

// HighWater is the server side of HTTP fencing for a single process: it
// remembers the highest token admitted per resource. It orders admissions,
// not effects: a request admitted with token 5 that is still running when a
// token-6 request is admitted can finish after it. Serialise requests per
// resource, or apply effects with Table, where ordering matters. (A service
// with several replicas must keep the high-water mark in its database, with
// Table.) It keeps one entry per resource ever seen. The zero value is ready
// to use.
type HighWater struct {
	mu   sync.Mutex
	seen map[string]Token
}

// Admit records t for resource and returns nil if t is at least the highest
// token seen, or a *FencedError.
func (w *HighWater) Admit(resource string, t Token) error {
	if !t.Valid() {
		return &FencedError{Resource: resource, Held: t, Reason: "not a granted token"}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == nil {
		w.seen = make(map[string]Token)
	}
	if cur := w.seen[resource]; t < cur {
		return &FencedError{Resource: resource, Held: t, Current: cur, Reason: "a higher token was admitted"}
	}
	w.seen[resource] = t
	return nil
}

// Middleware admits each request by its token for the resource that
// resource(r) names, and answers StatusFenced (with CurrentHeader) or 400
// for a missing token, without calling next. Admission happens before next
// runs: pair it with idempotent handlers.
func (w *HighWater) Middleware(resource func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		t, err := FromHeader(r.Header)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		if err := w.Admit(resource(r), t); err != nil {
			fe := err.(*FencedError)
			rw.Header().Set(CurrentHeader, fe.Current.String())
			http.Error(rw, err.Error(), StatusFenced)
			return
		}
		next.ServeHTTP(rw, r)
	})
}
