// Package admin is the work behind the leasehold command's database
// commands (cmd/leasehold): connecting within a timeout, migrating, reading
// the status report, parsing and enqueueing jobs, and showing, listing,
// retrying and cancelling jobs. The command holds the flags and the
// printing; this package prints nothing.
//
// The results are the documents that `--json` prints: their JSON tags are
// the command's output format (docs/cli.md). Errors are typed and speak in
// the command's terms, naming the flag or the input line at fault:
// ErrNoDatabase and ErrUnreachable for the connection, ErrBadInput (wrapped
// by a *LineError for a malformed input line) for jobs that cannot be
// enqueued, a *MissingError for job ids not found and a *NotChangedError
// for jobs that retry or cancel left alone.
package admin
