// Package ui is leasehold's web UI for operators: groups and their members,
// throughput and backlog; the ownership map of a group (every partition's
// owner, fencing token, lease expiry, in-flight jobs, backlog and lag, and
// the recent handoffs and fenced refusals); jobs, with filters and paging
// that stay fast on millions of jobs; and batches, with progress, rate and
// ETA. Pages are server-rendered HTML, readable without JavaScript, and
// update themselves in the browser when it runs.
//
// The UI is an http.Handler: `leasehold ui` serves it on 127.0.0.1:8080, and
// an application mounts it in its own server, behind its own
// authentication:
//
//	h, err := ui.New(db, ui.Config{Path: "/queue"})
//	if err != nil { ... }
//	mux.Handle("/queue/", requireAdmin(h))
//
// It is read-only unless Config.AllowActions is set: then it offers retry,
// cancel, pause and resume, and cancelling a batch, each a POST protected
// against cross-site request forgery and logged. The Handler does not check
// the request's Host (`leasehold ui` does, against DNS rebinding): mounted
// in a server, that server's Host handling and authentication apply.
//
// Every page is bounded in cost whatever the jobs table holds: the job
// lists search at most Config.Scan jobs for at most Config.ScanTime per
// page, and each group's backlog (whose count reads every pending job) is
// counted in the background at most once per Config.BacklogAge, the pages
// showing its age. See docs/ui.md.
package ui
