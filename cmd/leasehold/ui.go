package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/uiserve"
	"github.com/leasehold/leasehold/ui"
)

// defaultUIAddr is where `leasehold ui` and `leasehold demo --ui` serve:
// this machine only, unless told otherwise.
const defaultUIAddr = "127.0.0.1:8080"

// newUICmd is `leasehold ui`: the web UI (package ui) on an address.
func newUICmd(opts *rootOptions) *cobra.Command {
	var (
		db      dbFlags
		addr    string
		allow   bool
		refresh time.Duration
		hosts   []string
		secure  string
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web UI for operators (read-only unless --allow-actions)",
		Long: "ui serves the web UI on --addr (127.0.0.1:8080: this machine only) until interrupted: the groups\n" +
			"and their members, throughput and backlog; each group's ownership map (owner, fencing token,\n" +
			"lease expiry, running jobs, backlog and lag per partition) and its recent handoffs and fenced\n" +
			"refusals; jobs, with filters; batches, with progress, rate and ETA. Pages update themselves.\n" +
			"It is read-only unless --allow-actions: then it offers retry, cancel, pause and resume, and\n" +
			"cancelling a batch, each logged on stderr. It has no authentication of its own: to serve it\n" +
			"beyond this machine, mount the ui package's handler in a server behind yours (docs/ui.md).\n" +
			"On a loopback address it answers only to localhost, 127.0.0.1 and [::1] (against DNS\n" +
			"rebinding); --allowed-host adds the name a proxy in front of it uses. Its cookies are marked\n" +
			"Secure when a request came over https (a proxy's X-Forwarded-Proto or Forwarded header says\n" +
			"so); --secure-cookies marks them always, as behind a TLS proxy that sends neither header.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sc, err := ui.ParseCookieSecurity(secure)
			if err != nil {
				return usageErr(cmd, fmt.Sprintf("--secure-cookies %q: want auto, always or never", secure))
			}
			// The schema check gets the connect timeout; the pages'
			// queries are bounded by their requests.
			db.timeout = db.connectTimeout
			h, _, done, err := db.connect(cmd.Context(), opts.logger(cmd.ErrOrStderr()))
			if err != nil {
				return err
			}
			defer done()
			// The actions are logged whatever --verbose says.
			uh, err := ui.New(h, ui.Config{AllowActions: allow, Refresh: refresh, SecureCookies: sc,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))})
			if err != nil {
				return err
			}
			srv, err := uiserve.Listen(addr, "--addr", uh, uiserve.Options{AllowedHosts: hosts})
			if err != nil {
				return err
			}
			mode := "read-only (--allow-actions enables the actions)"
			if allow {
				mode = "with actions"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "leasehold ui: serving %s, %s, on schema %s; interrupt (Ctrl-C) to stop\n",
				srv.URL(), mode, h.Schema())
			if err := srv.Serve(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "leasehold ui: stopped")
			return nil
		},
	}
	db.addConnection(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&addr, "addr", defaultUIAddr, "serve on this host:port (a port of 0 picks a free one)")
	f.BoolVar(&allow, "allow-actions", false, "offer retry, cancel, pause, resume and cancelling a batch (each a POST, CSRF-protected and logged)")
	f.DurationVar(&refresh, "refresh", 2*time.Second, "how often pages update themselves in the browser (0: the default; negative: never)")
	f.StringArrayVar(&hosts, "allowed-host", nil, "also answer to this Host name (name, or name:port), as a proxy in front of the UI sends it; repeatable. "+
		"On a loopback --addr the UI answers only to localhost, 127.0.0.1 and [::1] otherwise; on another address, to any name unless this is given")
	f.StringVar(&secure, "secure-cookies", "auto", "mark the UI's cookies (CSRF token, flash message) Secure, sent over https only: "+
		"auto (when the request came over https, as a proxy's X-Forwarded-Proto or Forwarded header says), always, or never; "+
		"--secure-cookies alone is always (behind a proxy terminating TLS)")
	f.Lookup("secure-cookies").NoOptDefVal = "always"
	return cmd
}
