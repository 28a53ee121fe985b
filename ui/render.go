package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages are the templates, by page: each is the layout with the page's
// "content" (and "title") definitions.
var pages = func() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	m := map[string]*template.Template{}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t := template.Must(template.Must(layout.Clone()).ParseFS(templateFS, n))
		m[n[len("templates/"):len(n)-len(".html")]] = t
	}
	return m
}()

// view is what every page's template gets: the layout's fields, and the
// page's own in Data.
type view struct {
	Title string
	// Base is Config.Path: every link starts with it.
	Base string
	// Self is the page's own path and query, under Base: where an action
	// returns to.
	Self string
	// Refresh is the live update period in milliseconds; 0: none.
	Refresh int64
	// Actions reports Config.AllowActions: the forms are rendered.
	Actions bool
	// CSRF is the token the forms carry (with Actions).
	CSRF string
	// Flash is the result of the action that led here.
	Flash string
	// Nav names the section of the navigation that is current.
	Nav string
	// Now is the database clock when the page was read.
	Now  time.Time
	Data any
	// Version is the assets' version, for their URLs.
	Version string
}

// newView returns the view of a page of r titled title, in section nav.
func (h *Handler) newView(w http.ResponseWriter, r *http.Request, title, nav string) *view {
	v := &view{Title: title, Base: h.cfg.Path, Self: h.cfg.Path + r.URL.EscapedPath(), Nav: nav, Actions: h.cfg.AllowActions,
		Version: assetVersion}
	if r.URL.RawQuery != "" {
		v.Self += "?" + r.URL.RawQuery
	}
	if h.cfg.Refresh > 0 {
		v.Refresh = h.cfg.Refresh.Milliseconds()
	}
	if h.cfg.AllowActions {
		v.CSRF = h.csrfToken(w, r)
	}
	v.Flash = h.takeFlash(w, r)
	return v
}

// render writes page name with v, status 200. It renders into a buffer
// first, so that a template error gives an error page, not half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, name string, v *view) {
	h.renderStatus(w, r, http.StatusOK, name, v)
}

func (h *Handler) renderStatus(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.log.ErrorContext(r.Context(), "ui: render", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "ui: the page could not be rendered (see the log)", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// problem is the data of the error page.
type problem struct {
	Status  int
	Text    string // the status's text
	Message string
}

// fail writes the error page for err with status, and logs it.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status >= 500 {
		h.log.ErrorContext(r.Context(), "ui: request failed", "method", r.Method, "path", h.cfg.Path+r.URL.Path, "status", status, "err", err)
	} else {
		h.log.WarnContext(r.Context(), "ui: request failed", "method", r.Method, "path", h.cfg.Path+r.URL.Path, "status", status, "err", err)
	}
	v := h.newView(w, r, http.StatusText(status), "")
	v.Refresh = 0 // nothing to update
	v.Data = problem{Status: status, Text: http.StatusText(status), Message: err.Error()}
	h.renderStatus(w, r, status, "error", v)
}

// failErr writes the error page for err, with the status its kind calls
// for (see status).
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	h.fail(w, r, status(err), err)
}

// errBadInput is wrapped by the errors about a request's malformed
// parameters.
var errBadInput = errors.New("bad input")

// badInput returns an error wrapping errBadInput.
func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadInput, fmt.Sprintf(format, args...))
}

// status returns the HTTP status for err: 404 for what does not exist, 400
// for malformed input, 503 for anything else: the UI's reads and actions
// fail only when the database does (closed, unreachable, not migrated, or
// timing out).
func status(err error) int {
	switch {
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrUnknownGroup),
		errors.Is(err, queue.ErrUnknownBatch), errors.Is(err, partition.ErrGroupNotFound), errors.Is(err, errNotFound):
		return http.StatusNotFound
	case errors.Is(err, errBadInput), errors.Is(err, queue.ErrInvalidFilter), errors.Is(err, queue.ErrInvalidPause),
		errors.Is(err, queue.ErrInvalidBatch):
		return http.StatusBadRequest
	case errors.Is(err, context.Canceled):
		return 499 // the client went away; nobody reads the page
	}
	return http.StatusServiceUnavailable
}

// errNotFound is wrapped by the errors about what a request names that
// does not exist (and that no component's error says).
var errNotFound = errors.New("not found")

// badNotFound returns an error wrapping errNotFound.
func badNotFound(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotFound, fmt.Sprintf(format, args...))
}
