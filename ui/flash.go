package ui

import (
	"encoding/base64"
	"net/http"
	"unicode/utf8"
)

// The result of an action is carried to the page it returns to in a
// short-lived cookie rather than in the URL, so that nobody can link to a
// UI page that displays a message of their choosing.

// flashCookie is the name of the flash message's cookie.
const flashCookie = "leasehold_flash"

// setFlash sets msg as the flash message the next page shows.
func (h *Handler) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(msg)),
		Path: h.cookiePath(), MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// takeFlash returns the flash message r carries, if any, and clears it.
func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: h.cookiePath(), MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || !utf8.Valid(b) {
		return ""
	}
	return string(b)
}
