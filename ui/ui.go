package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/queue"
)

// ErrInvalidConfig is wrapped by New's error for an invalid Config.
var ErrInvalidConfig = errors.New("ui: invalid config")

// Config configures the UI.
type Config struct {
	// Path is the URL path the handler is mounted at, such as "/queue": the
	// UI's links start with it, and it removes it from the requests it
	// serves. It must be "" or start with "/", be a clean path (no "..",
	// no "//") and not end with "/". Defaults to "" (the root).
	Path string
	// AllowActions enables the actions: retrying and cancelling jobs,
	// pausing and resuming groups and kinds, cancelling batches. Defaults
	// to false: the UI is read-only, and offers no action.
	AllowActions bool
	// Actor names who made a request, for the log of actions: typically the
	// user your authentication middleware put in the request's context.
	// Defaults to the request's remote address (also used when it returns
	// "").
	Actor func(*http.Request) string
	// Refresh is how often pages update themselves in a browser running
	// JavaScript. Defaults to 2s; negative disables live updates.
	Refresh time.Duration
	// Timeout bounds each request: the database reads of a page, or an
	// action. A page whose reads take longer (a table locked by a
	// migration, an overloaded database) answers 503 saying so, rather
	// than holding a connection of the pool and the browser's request for
	// good. Defaults to 10s; negative: none.
	Timeout time.Duration
	// LagAlert is how long a partition's oldest due job may have waited
	// before the ownership map marks the partition as lagging. Defaults to
	// 1m.
	LagAlert time.Duration
	// BacklogAge is how old the backlog shown may be: the counts of
	// pending jobs, the lag and the waiting keys of the overview and the
	// ownership maps. Counting them reads every pending job of a group
	// (about 0.1s of database time per 50,000), so the UI counts each
	// group at most once per BacklogAge however many pages are open, in
	// the background: a page shows the latest count at once, with its age,
	// and only a group's first page waits for one. Defaults to 5s;
	// negative: every page counts, and waits for it.
	BacklogAge time.Duration
	// Scan is how many jobs a page of the jobs list reads at most to fill
	// itself (queue.Filter.Scan): a page with a filter matching few jobs
	// stops there, and offers to search older jobs. 1 to
	// queue.MaxListLimit*10. Defaults to queue.DefaultScan.
	Scan int
	// ScanTime is how long a page of the jobs list searches at most, in
	// slices of 1,000 jobs, before it answers with what it found (at
	// most Scan jobs searched in any case): on a busy database a filter
	// matching rarely searches fewer jobs per page rather than answer
	// slowly. Defaults to 40ms.
	ScanTime time.Duration
	// SecureCookies says when the UI's cookies (the CSRF token, the flash
	// message of an action) are marked Secure, so that browsers send them
	// over https only. Defaults to SecureAuto: when the request came over
	// TLS, to the UI's own server or to a proxy in front of it that says
	// so (X-Forwarded-Proto: https, or Forwarded: proto=https). Behind a
	// proxy terminating TLS that sets neither header, set SecureAlways.
	SecureCookies CookieSecurity
	// Logger receives the log of actions and of failed requests. Defaults
	// to the DB's logger.
	Logger *slog.Logger
}

// CookieSecurity says when the UI marks its cookies Secure (see
// Config.SecureCookies). Its zero value is SecureAuto.
type CookieSecurity int

const (
	// SecureAuto marks the cookies Secure when the request came over TLS:
	// the request's own connection, or a proxy's X-Forwarded-Proto: https
	// or Forwarded: proto=https header. A client forging the header only
	// gets cookies its browser keeps for https.
	SecureAuto CookieSecurity = iota
	// SecureAlways marks the cookies Secure whatever the request: for a
	// UI that browsers reach over https alone, as behind a proxy
	// terminating TLS. A browser reaching it over plain http (but on
	// localhost) then drops them, and its actions are refused.
	SecureAlways
	// SecureNever never marks the cookies Secure, even over TLS.
	SecureNever
)

// String returns the setting's name, as the --secure-cookies flag of
// `leasehold ui` takes it: "auto", "always" or "never".
func (s CookieSecurity) String() string {
	switch s {
	case SecureAuto:
		return "auto"
	case SecureAlways:
		return "always"
	case SecureNever:
		return "never"
	}
	return fmt.Sprintf("CookieSecurity(%d)", int(s))
}

// ParseCookieSecurity returns the setting named s: "auto", "always" or
// "never" (also "true" for always and "false" for never). It returns an
// error wrapping ErrInvalidConfig for another name.
func ParseCookieSecurity(s string) (CookieSecurity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		return SecureAuto, nil
	case "always", "true":
		return SecureAlways, nil
	case "never", "false":
		return SecureNever, nil
	}
	return 0, fmt.Errorf("%w: secure cookies %q: want auto, always or never", ErrInvalidConfig, s)
}

// Handler serves the UI. It is safe for concurrent use.
type Handler struct {
	db  *leasehold.DB
	q   *queue.Client
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

	backlog *backlogs
	now     func() time.Time // the local clock, for the jobs list's search time

	mu     sync.Mutex
	meters map[int64]*admin.RateMeter // batch id -> rate measured over the reads of its pages
}

// maxMeters bounds the batches whose rate the Handler remembers.
const maxMeters = 1000

// New returns the UI's handler for db. It returns an error wrapping
// ErrInvalidConfig for an invalid cfg.
func New(db *leasehold.DB, cfg Config) (*Handler, error) {
	if db == nil || db.Pool() == nil {
		return nil, fmt.Errorf("%w: nil or zero DB (use leasehold.Open)", ErrInvalidConfig)
	}
	if p := cfg.Path; p != "" && (!strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || path.Clean(p) != p ||
		strings.ContainsAny(p, "?#%\\\"'<> \t\r\n")) {
		return nil, fmt.Errorf("%w: Path %q: want \"\" or a clean path starting with \"/\" and not ending with \"/\", such as \"/queue\"", ErrInvalidConfig, p)
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 2 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.BacklogAge == 0 {
		cfg.BacklogAge = 5 * time.Second
	}
	if cfg.LagAlert < 0 {
		return nil, fmt.Errorf("%w: LagAlert %v is negative", ErrInvalidConfig, cfg.LagAlert)
	}
	if cfg.LagAlert == 0 {
		cfg.LagAlert = time.Minute
	}
	if cfg.Scan < 0 || cfg.Scan > queue.MaxListLimit*10 {
		return nil, fmt.Errorf("%w: Scan %d is not in 0..%d", ErrInvalidConfig, cfg.Scan, queue.MaxListLimit*10)
	}
	if cfg.Scan == 0 {
		cfg.Scan = queue.DefaultScan
	}
	if cfg.ScanTime < 0 {
		return nil, fmt.Errorf("%w: ScanTime %v is negative", ErrInvalidConfig, cfg.ScanTime)
	}
	if cfg.ScanTime == 0 {
		cfg.ScanTime = 40 * time.Millisecond
	}
	if cfg.SecureCookies < SecureAuto || cfg.SecureCookies > SecureNever {
		return nil, fmt.Errorf("%w: SecureCookies %v: want SecureAuto, SecureAlways or SecureNever", ErrInvalidConfig, cfg.SecureCookies)
	}
	if cfg.Logger == nil {
		cfg.Logger = db.Logger()
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	h := &Handler{db: db, q: q, cfg: cfg, now: time.Now, log: cfg.Logger.With("component", "ui"), mux: http.NewServeMux(),
		meters: map[int64]*admin.RateMeter{}}
	h.backlog = &backlogs{maxAge: cfg.BacklogAge, timeout: cfg.Timeout, log: h.log, now: time.Now,
		m: map[string]*backlogEntry{},
		read: func(ctx context.Context, g string, waits bool) (admin.Backlog, error) {
			return admin.ReadBacklog(ctx, db, q, g, waits)
		}}
	h.routes()
	return h, nil
}

// routes registers the pages, the assets and the actions on h.mux, whose
// paths are relative to Config.Path.
func (h *Handler) routes() {
	h.mux.HandleFunc("GET /{$}", h.overview)
	h.mux.HandleFunc("GET /groups/{group}", h.group)
	h.mux.HandleFunc("GET /jobs", h.jobs)
	h.mux.HandleFunc("GET /jobs/{id}", h.job)
	h.mux.HandleFunc("GET /batches", h.batches)
	h.mux.HandleFunc("GET /batches/{id}", h.batch)
	// A file alone: "/assets/" would list the directory, and a subtree
	// pattern would redirect /assets to /assets/ outside Config.Path.
	h.mux.Handle("GET /assets/{file}", http.StripPrefix("/assets/", assetServer()))
	// Every method reaches the actions, so that they answer 405 to a GET
	// (or 404 when actions are off) rather than the catch-all's 404.
	h.mux.HandleFunc("/actions/{action}", h.action)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", h.cfg.Path+r.URL.Path))
	})
}

// ServeHTTP serves the UI's pages, assets and (with AllowActions) actions.
// It serves the requests whose path is under Config.Path, and answers 404
// to the others.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("X-Frame-Options", "DENY")
	if h.cfg.Timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	p := r.URL.Path
	if h.cfg.Path != "" {
		if p == h.cfg.Path && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			http.Redirect(w, r, h.cfg.Path+"/", http.StatusMovedPermanently)
			return
		}
		rest, ok := strings.CutPrefix(p, h.cfg.Path)
		if !ok || !strings.HasPrefix(rest, "/") {
			h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", p))
			return
		}
		// As http.StripPrefix: a shallow copy with the prefix removed.
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		r2.URL = &u
		r2.URL.Path = rest
		if r.URL.RawPath != "" {
			if raw, ok := strings.CutPrefix(r.URL.RawPath, h.cfg.Path); ok {
				r2.URL.RawPath = raw
			} else {
				r2.URL.RawPath = ""
			}
		}
		r = r2
	}
	// A path to clean ("//", "/./", "/../"): ServeMux would redirect to
	// the clean path without Config.Path, out of the mount point. As
	// ServeMux, the escaped path: a group named "a/../b" is linked as
	// /groups/a%2F..%2Fb, which is clean.
	if esc := r.URL.EscapedPath(); cleanPath(esc) != esc {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.fail(w, r, http.StatusNotFound, fmt.Errorf("no page at %s", h.cfg.Path+r.URL.Path))
			return
		}
		loc := h.cfg.Path + cleanPath(esc)
		if r.URL.RawQuery != "" {
			loc += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, loc, http.StatusMovedPermanently)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// cleanPath is p cleaned as ServeMux does: rooted, without "//", "." or
// "..", keeping a trailing slash.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// contentSecurityPolicy allows the UI's own assets only: no inline script
// or style, no framing, forms posting to the UI alone.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// meter returns the rate of batch b measured over the reads of its pages,
// and whether it is a measurement (see admin.RateMeter.Measure): until it
// is, the rate is the batch's average since it was created.
func (h *Handler) meter(b queue.BatchInfo) (rate float64, measured bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.meters[b.ID]
	if m == nil {
		if len(h.meters) >= maxMeters {
			clear(h.meters) // rare: the rates start over from the batches' averages
		}
		m = &admin.RateMeter{}
		h.meters[b.ID] = m
	}
	return m.Measure(b)
}
