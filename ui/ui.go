package ui

import (
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
	// LagAlert is how long a partition's oldest due job may have waited
	// before the ownership map marks the partition as lagging. Defaults to
	// 1m.
	LagAlert time.Duration
	// Logger receives the log of actions and of failed requests. Defaults
	// to the DB's logger.
	Logger *slog.Logger
}

// Handler serves the UI. It is safe for concurrent use.
type Handler struct {
	db  *leasehold.DB
	q   *queue.Client
	cfg Config
	log *slog.Logger
	mux *http.ServeMux

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
	if cfg.LagAlert < 0 {
		return nil, fmt.Errorf("%w: LagAlert %v is negative", ErrInvalidConfig, cfg.LagAlert)
	}
	if cfg.LagAlert == 0 {
		cfg.LagAlert = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = db.Logger()
	}
	q, err := queue.New(db, queue.Config{})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	h := &Handler{db: db, q: q, cfg: cfg, log: cfg.Logger.With("component", "ui"), mux: http.NewServeMux(),
		meters: map[int64]*admin.RateMeter{}}
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
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", assetServer()))
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
	h.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy allows the UI's own assets only: no inline script
// or style, no framing, forms posting to the UI alone.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// meter returns the rate of batch b measured over the reads of its pages.
func (h *Handler) meter(b queue.BatchInfo) float64 {
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
	return m.Add(b)
}
