package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// A flash message longer than a cookie holds is cut at a rune's start, and
// still shown: cut inside a rune, it would not be UTF-8 and takeFlash
// would drop it.
func TestFlashCutAtARune(t *testing.T) {
	h := &Handler{}
	for _, msg := range []string{strings.Repeat("é", maxFlash), strings.Repeat("x", maxFlash-1) + "€€", "short"} {
		rec := httptest.NewRecorder()
		h.setFlash(rec, httptest.NewRequest(http.MethodPost, "/actions/cancel", nil), msg)
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		for _, c := range rec.Result().Cookies() {
			req.AddCookie(c)
		}
		got := h.takeFlash(httptest.NewRecorder(), req)
		want := strings.TrimSuffix(got, "…")
		if got == "" || !utf8.ValidString(got) || !strings.HasPrefix(msg, want) || len(want) > maxFlash {
			t.Errorf("flash of %d bytes: got %d bytes %.20q…; want a prefix of at most %d bytes", len(msg), len(got), got, maxFlash)
		}
	}
}

// PostgreSQL's data exceptions (SQLSTATE class 22: a value it refuses)
// are the request's fault: 400, not 503; a timeout is 503, and says the
// UI's timeout passed.
func TestStatusOfDataExceptions(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("queue: list: %w", &pgconn.PgError{Code: "22021", Message: "invalid byte sequence for encoding \"UTF8\": 0xff"}), http.StatusBadRequest},
		{&pgconn.PgError{Code: "22P02"}, http.StatusBadRequest},
		{&pgconn.PgError{Code: "53300"}, http.StatusServiceUnavailable}, // too many connections
		{context.DeadlineExceeded, http.StatusServiceUnavailable},
		{errors.New("unknown"), http.StatusServiceUnavailable},
	} {
		if got := status(c.err); got != c.want {
			t.Errorf("status(%v) = %d; want %d", c.err, got, c.want)
		}
	}
}
