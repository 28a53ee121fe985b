package ui

import (
	"bytes"
	"context"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/leasehold/leasehold"
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

// liveHeader is the request header live.js sends with its fetches.
const liveHeader = "X-Leasehold-Live"

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
	// A live update leaves the flash to the page it is for: live.js may
	// fetch while the browser follows an action's redirect, and the flash
	// it took would be lost (the update replaces only the live regions).
	if r.Header.Get(liveHeader) == "" {
		v.Flash = h.takeFlash(w, r)
	}
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

// fail writes the error page for err with status, and logs it (see
// report: the page shows the database's errors by their id alone).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	msg := h.report(r, "ui: request failed", status, err)
	v := h.newView(w, r, http.StatusText(status), "")
	v.Refresh = 0 // nothing to update
	v.Data = problem{Status: status, Text: http.StatusText(status), Message: msg}
	h.renderStatus(w, r, status, "error", v)
}

// failErr writes the error page for err, with the status its kind calls
// for (see status).
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	err = h.explain(err)
	h.fail(w, r, status(err), err)
}

// report logs err (message logMsg), a failure of request r with status
// (that of the request, or the one it would have for a part of a page that
// could not be read), and returns what a page may show of it. The
// request's own faults (a 4xx from the UI's or a component's checks: a
// malformed id, a group that does not exist) are shown as they are, and
// logged at warning level. The others (the
// database's errors: 5xx, a value PostgreSQL refused, a request cancelled)
// may name the database's user, host and database, or its tables: the
// page shows a short message saying what kind of failure it was, with a
// random id, and the error is logged with that id (key error_id), at
// error level for a 5xx, so that an operator can find the log line.
func (h *Handler) report(r *http.Request, logMsg string, status int, err error) string {
	attrs := []any{"method", r.Method, "path", h.cfg.Path + r.URL.Path, "status", status}
	var pe *pgconn.PgError
	if status < 500 && status != statusClientClosed && !errors.As(err, &pe) {
		h.log.WarnContext(r.Context(), logMsg, append(attrs, "err", err)...)
		return err.Error()
	}
	id := errorID()
	level := slog.LevelError
	if status < 500 {
		level = slog.LevelWarn
	}
	h.log.Log(r.Context(), level, logMsg, append(attrs, "error_id", id, "err", err)...)
	return fmt.Sprintf("%s (error %s: the UI's log has the details)", h.publicMessage(status, err), id)
}

// publicMessage says what kind of failure err is, in terms that name
// nothing of the database (see report).
func (h *Handler) publicMessage(status int, err error) string {
	switch {
	case status == statusClientClosed:
		return "the request was cancelled"
	case status < 500:
		return "the database refused a value of the request"
	case errors.Is(err, context.DeadlineExceeded) && h.cfg.Timeout > 0:
		return fmt.Sprintf("the database did not answer within %v (the UI's timeout)", h.cfg.Timeout)
	case errors.Is(err, leasehold.ErrClosed), errors.Is(err, puddle.ErrClosedPool):
		return "the UI's connection pool is closed"
	case errors.Is(err, leasehold.ErrNotMigrated):
		return "leasehold's schema is not migrated in the UI's database (run leasehold migrate)"
	}
	return "the database failed or could not be reached"
}

// errorID returns a new random id of a failure: 10 hex digits.
func errorID() string {
	return hex.EncodeToString(randomBytes(5))
}

// explain returns err, saying so when it is the request's Config.Timeout
// that passed.
func (h *Handler) explain(err error) error {
	if errors.Is(err, context.DeadlineExceeded) && h.cfg.Timeout > 0 {
		return fmt.Errorf("the database did not answer within %v (the UI's timeout): %w", h.cfg.Timeout, err)
	}
	return err
}

// errBadInput is wrapped by the errors about a request's malformed
// parameters.
var errBadInput = errors.New("bad input")

// badInput returns an error wrapping errBadInput.
func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadInput, fmt.Sprintf(format, args...))
}

// status returns the HTTP status for err: 404 for what does not exist, 400
// for malformed input (the UI's checks, a component's, or PostgreSQL's
// data exceptions, SQLSTATE class 22, should a value pass them), 409 for
// an action a batch's state refuses (a retry of a cancelled batch's
// item), 503 for
// anything else: the UI's reads and actions fail only when the database
// does (closed, unreachable, not migrated, or timing out).
func status(err error) int {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, queue.ErrUnknownGroup),
		errors.Is(err, queue.ErrUnknownBatch), errors.Is(err, partition.ErrGroupNotFound), errors.Is(err, errNotFound):
		return http.StatusNotFound
	case errors.Is(err, errBadInput), errors.Is(err, queue.ErrInvalidFilter), errors.Is(err, queue.ErrInvalidPause),
		errors.Is(err, queue.ErrInvalidBatch), errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22"):
		return http.StatusBadRequest
	case errors.Is(err, queue.ErrBatchCancelled), errors.Is(err, queue.ErrBatchSealed),
		errors.Is(err, queue.ErrBatchNotFinished), errors.Is(err, queue.ErrBatchExists):
		return http.StatusConflict // the batch's state refuses the action: shown as it is
	case errors.Is(err, context.Canceled):
		return statusClientClosed
	}
	return http.StatusServiceUnavailable
}

// statusClientClosed is the status of a request whose client went away
// (nginx's 499): nobody reads the page.
const statusClientClosed = 499

// Limits of the values a request names, as the queue stores them: a
// longer value matches nothing, and is refused before it is sent.
const (
	maxName   = 100 // a group's or a kind's name
	maxKey    = 255 // a job's key, a batch's name
	maxReason = 1000
)

// checkText returns an error wrapping errBadInput unless s, the value of
// field, is at most max bytes of UTF-8 without NUL: PostgreSQL refuses
// the others (invalid byte sequence), and that is the request's fault, not
// the database's.
func checkText(field, s string, max int) error {
	switch {
	case len(s) > max:
		return badInput("%s is %d bytes long; at most %d", field, len(s), max)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return badInput("%s %q is not valid UTF-8 text (or holds a NUL)", field, s)
	}
	return nil
}

// errNotFound is wrapped by the errors about what a request names that
// does not exist (and that no component's error says).
var errNotFound = errors.New("not found")

// badNotFound returns an error wrapping errNotFound.
func badNotFound(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNotFound, fmt.Sprintf(format, args...))
}
