package ui

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/leasehold/leasehold"
)

// ErrInvalidConfig is wrapped by New's error for an invalid Config.
var ErrInvalidConfig = errors.New("ui: invalid config")

// Config configures the UI.
type Config struct {
	// Path is the URL path the handler is mounted at, such as "/queue": the
	// UI's links start with it, and it removes it from the requests it
	// serves. Defaults to "" (the root).
	Path string
	// AllowActions enables the actions: retrying and cancelling jobs,
	// pausing and resuming groups and kinds, cancelling batches. Defaults
	// to false: the UI is read-only, and offers no action.
	AllowActions bool
	// Actor names who made a request, for the log of actions: typically the
	// user your authentication middleware put in the request's context.
	// Defaults to the request's remote address.
	Actor func(*http.Request) string
	// Refresh is how often pages update themselves in a browser running
	// JavaScript. Defaults to 2s; negative disables live updates.
	Refresh time.Duration
	// Logger receives the log of actions and of failed requests. Defaults
	// to the DB's logger.
	Logger *slog.Logger
}

// Handler serves the UI. It is safe for concurrent use.
type Handler struct {
	db  *leasehold.DB
	cfg Config
	mux *http.ServeMux
}

// New returns the UI's handler for db. It returns an error wrapping
// ErrInvalidConfig for an invalid cfg.
func New(db *leasehold.DB, cfg Config) (*Handler, error) {
	if db == nil {
		return nil, errors.Join(ErrInvalidConfig, errors.New("ui: nil DB"))
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = db.Logger()
	}
	h := &Handler{db: db, cfg: cfg, mux: http.NewServeMux()}
	return h, nil
}

// ServeHTTP serves the UI's pages, assets and (with AllowActions) actions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}
