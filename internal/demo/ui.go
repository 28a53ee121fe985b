package demo

import (
	"context"

	"github.com/leasehold/leasehold/internal/uiserve"
	"github.com/leasehold/leasehold/ui"
)

// uiConns is the size of the web UI's pool: a few pages at a time, beside
// the fleet's own pools.
const uiConns = 4

// serveUI serves the web UI on the demo's database at Config.UIAddr, and
// tells its URL. It returns the URL and the function that stops the
// server and closes its pool.
func (s *story) serveUI(ctx context.Context) (_ string, stop func(), err error) {
	db, closeDB, err := s.l.OpenDB(ctx, uiConns, s.cfg.Logger)
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			closeDB()
		}
	}()
	h, err := ui.New(db, ui.Config{AllowActions: s.cfg.UIActions, Logger: s.cfg.Logger})
	if err != nil {
		return "", nil, err
	}
	srv, err := uiserve.Listen(s.cfg.UIAddr, "--ui-addr", h, uiserve.Options{})
	if err != nil {
		return "", nil, err
	}
	// The server stops when stop is called, not when ctx ends: an
	// interrupt during the story ends Run, which then calls stop.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(sctx)
	}()
	mode := "read-only"
	if s.cfg.UIActions {
		mode = "with actions"
	}
	s.step("The web UI serves the demo's database at %s (%s): open %sgroups/%s", srv.URL(), mode, srv.URL(), Group)
	s.detail("         to watch the partitions change hands.")
	return srv.URL(), func() {
		cancel()
		<-served
		closeDB()
	}, nil
}
