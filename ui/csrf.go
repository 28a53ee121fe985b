package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Cross-site request forgery: the actions are wrapped in Go's
// http.CrossOriginProtection (a browser's Sec-Fetch-Site, else Origin
// against Host) and need a double-submitted token: a random value in a
// cookie of the UI's path, HttpOnly and SameSite=Lax, that each form
// carries in field csrf. A page of another origin can neither read the
// cookie nor set it, so it cannot forge the field.
//
// Lax, not Strict: a browser following a link to the UI from another site
// (a chat message, an alert's link) sends no Strict cookie with that
// navigation, so the UI would mint a new token and overwrite the cookie,
// and every form already open in another tab would then be refused. Lax
// cookies go with top-level navigations (GET) but, as Strict ones, not
// with a cross-site POST: a forged form post carries no cookie, and is
// refused by CrossOriginProtection before that.

// csrfCookie is the name of the token's cookie.
const csrfCookie = "leasehold_csrf"

// csrfLen is the length of a token: 32 random bytes in base64url.
const csrfLen = 43

// errCSRF is the error of an action refused as a cross-site request.
var errCSRF = errors.New("cross-site request refused: the form's csrf token is missing or does not match this browser's; reload the page and try again")

// cookiePath is the path of the UI's cookies.
func (h *Handler) cookiePath() string {
	if h.cfg.Path == "" {
		return "/"
	}
	return h.cfg.Path
}

// secure reports whether the cookies set in answer to r are marked Secure
// (see Config.SecureCookies).
func (h *Handler) secure(r *http.Request) bool {
	switch h.cfg.SecureCookies {
	case SecureAlways:
		return true
	case SecureNever:
		return false
	}
	return r.TLS != nil || forwardedHTTPS(r.Header)
}

// forwardedHTTPS reports whether a proxy says, in hd, that the request
// came to it over https: X-Forwarded-Proto (its first value, the
// client-facing proxy's) or Forwarded's proto (RFC 7239) is https.
func forwardedHTTPS(hd http.Header) bool {
	if v := hd.Get("X-Forwarded-Proto"); v != "" {
		first, _, _ := strings.Cut(v, ",")
		return strings.EqualFold(strings.TrimSpace(first), "https")
	}
	if v := hd.Get("Forwarded"); v != "" {
		first, _, _ := strings.Cut(v, ",")
		for _, pair := range strings.Split(first, ";") {
			k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && strings.EqualFold(k, "proto") {
				return strings.EqualFold(strings.Trim(val, `"`), "https")
			}
		}
	}
	return false
}

// csrfToken returns the browser's token, setting a new one on w if r
// carries none (or a malformed one).
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validToken(c.Value) {
		return c.Value
	}
	tok := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: h.cookiePath(), HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: h.secure(r)})
	return tok
}

// checkCSRF reports whether r's form field csrf matches its cookie.
func checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validToken(c.Value) {
		return false
	}
	f := r.PostFormValue("csrf")
	return len(f) == len(c.Value) && subtle.ConstantTimeCompare([]byte(f), []byte(c.Value)) == 1
}

// validToken reports whether s is shaped as a token.
func validToken(s string) bool {
	if len(s) != csrfLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand crashes the program instead)
	return b
}
