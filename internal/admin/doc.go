// Package admin is the work behind the leasehold command's database
// commands (cmd/leasehold): connecting within a timeout, checking and
// migrating the schema, reading the status report, creating and listing
// groups, parsing and enqueueing jobs, showing, listing, retrying and
// cancelling jobs, and submitting, reading, sealing, cancelling and
// retrying batches. The command holds the flags and the printing; this
// package prints nothing.
//
// The results are the documents that `--json` prints: their JSON tags are
// the command's output format (docs/cli.md). Errors are typed and speak in
// the command's terms, naming the flag or the input line at fault:
// ErrNoDatabase, ErrUnreachable and ErrRejected for the connection, a
// *NotMigratedError (CheckSchema) for a schema to migrate, ErrBadInput (wrapped
// by a *LineError for a malformed input line) for jobs that cannot be
// enqueued, a *MissingError for job ids not found, a *NotChangedError
// for jobs that retry or cancel left alone, a *SubmitError naming the input
// line where a batch submission stopped and an *AmbiguousBatchError for a
// batch named without its group that several groups have.
package admin
