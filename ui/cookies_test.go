package ui_test

import (
	cryptotls "crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/ui"
)

// cookieFlags returns the Secure attribute of each cookie the UI sets along
// an action's round trip, for requests made with header hd over http (or
// over TLS with tls): the CSRF cookie of a page, the flash cookie the
// action sets, and the flash cookie's removal by the next page.
func cookieFlags(t *testing.T, e *env, hd http.Header, tls bool) map[string]bool {
	t.Helper()
	scheme := "http"
	if tls {
		scheme = "https"
	}
	send := func(req *http.Request, cookies []*http.Cookie) response {
		for k, vs := range hd {
			req.Header[k] = vs
		}
		for _, c := range cookies {
			req.AddCookie(c)
		}
		return e.do(req)
	}
	got := map[string]bool{}
	page := send(httptest.NewRequest(http.MethodGet, scheme+"://ui.example/groups/emails", nil), nil)
	var csrf *http.Cookie
	for _, c := range page.Cookies() {
		if c.Name == "leasehold_csrf" {
			csrf, got["csrf"] = c, c.Secure
		}
	}
	if csrf == nil {
		t.Fatalf("the page set no CSRF cookie: %v", page.Cookies())
	}
	form := url.Values{"group": {"emails"}, "csrf": {csrf.Value}}
	post := postReq("/actions/pause", form)
	if tls {
		post.URL.Scheme, post.TLS = "https", &cryptotls.ConnectionState{}
	}
	res := send(post, []*http.Cookie{csrf})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("pause: %d %q; want 303", res.StatusCode, text(byID(res.Doc, "error-message")))
	}
	var flash *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "leasehold_flash" {
			flash, got["flash"] = c, c.Secure
		}
	}
	if flash == nil {
		t.Fatalf("the action set no flash cookie: %v", res.Cookies())
	}
	next := send(httptest.NewRequest(http.MethodGet, scheme+"://ui.example/groups/emails", nil), []*http.Cookie{csrf, flash})
	for _, c := range next.Cookies() {
		if c.Name == "leasehold_flash" && c.MaxAge < 0 {
			got["flash removal"] = c.Secure
		}
	}
	if _, ok := got["flash removal"]; !ok {
		t.Fatalf("the next page did not remove the flash cookie: %v", next.Cookies())
	}
	return got
}

// Config.SecureCookies: the CSRF and flash cookies set over plain http
// carry Secure with SecureAlways (a proxy terminating TLS in front of the
// UI), and not with SecureNever, even over TLS. SecureAuto, the default,
// marks them Secure over TLS and when a proxy says the request came to it
// over https (X-Forwarded-Proto, Forwarded), and not otherwise.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	plain := http.Header{}
	xfp := http.Header{"X-Forwarded-Proto": {"https"}}
	fwd := http.Header{"Forwarded": {`for=192.0.2.60;proto=https;by=203.0.113.43`}}
	xfpHTTP := http.Header{"X-Forwarded-Proto": {"http"}, "Forwarded": {"proto=https"}} // X-Forwarded-Proto rules
	for _, c := range []struct {
		name   string
		secure ui.CookieSecurity
		hd     http.Header
		tls    bool
		want   bool
	}{
		{"auto, plain http", ui.SecureAuto, plain, false, false},
		{"auto, over TLS", ui.SecureAuto, plain, true, true},
		{"auto, X-Forwarded-Proto https", ui.SecureAuto, xfp, false, true},
		{"auto, Forwarded proto=https", ui.SecureAuto, fwd, false, true},
		{"auto, X-Forwarded-Proto http", ui.SecureAuto, xfpHTTP, false, false},
		{"always, plain http", ui.SecureAlways, plain, false, true},
		{"never, plain http", ui.SecureNever, plain, false, false},
		{"never, X-Forwarded-Proto https", ui.SecureNever, xfp, false, false},
		{"never, over TLS", ui.SecureNever, plain, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, ui.Config{AllowActions: true, SecureCookies: c.secure})
			for cookie, secure := range cookieFlags(t, e, c.hd, c.tls) {
				if secure != c.want {
					t.Errorf("%s cookie Secure = %v; want %v", cookie, secure, c.want)
				}
			}
		})
	}
}

// SecureCookies' names parse (as the --secure-cookies flag takes them),
// and New refuses a value out of range.
func TestSecureCookiesConfig(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]ui.CookieSecurity{"auto": ui.SecureAuto, "": ui.SecureAuto, "always": ui.SecureAlways,
		"true": ui.SecureAlways, "Never": ui.SecureNever, "false": ui.SecureNever} {
		if got, err := ui.ParseCookieSecurity(s); err != nil || got != want {
			t.Errorf("ParseCookieSecurity(%q) = %v, %v; want %v", s, got, err, want)
		}
		if want.String() == "" {
			t.Errorf("%d has no name", want)
		}
	}
	if _, err := ui.ParseCookieSecurity("sometimes"); !errors.Is(err, ui.ErrInvalidConfig) {
		t.Errorf("ParseCookieSecurity(sometimes): %v; want ErrInvalidConfig", err)
	}
	db := pgtest.DB(t)
	for _, s := range []ui.CookieSecurity{-1, ui.SecureNever + 1} {
		if _, err := ui.New(db, ui.Config{SecureCookies: s}); !errors.Is(err, ui.ErrInvalidConfig) {
			t.Errorf("SecureCookies %d: %v; want ErrInvalidConfig", s, err)
		}
	}
}
