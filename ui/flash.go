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

// maxFlash bounds the flash message, in bytes: a cookie holds about 4 KB.
const maxFlash = 1000

// setFlash sets msg as the flash message the next page shows.
func (h *Handler) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	if len(msg) > maxFlash {
		// At a rune's start: a message cut inside one is not UTF-8, and
		// takeFlash would drop it.
		i := maxFlash
		for i > 0 && !utf8.RuneStart(msg[i]) {
			i--
		}
		msg = msg[:i] + "…"
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(msg)),
		Path: h.cookiePath(), MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
}

// takeFlash returns the flash message r carries, if any, and clears it.
func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: h.cookiePath(), MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || !utf8.Valid(b) {
		return ""
	}
	return string(b)
}
