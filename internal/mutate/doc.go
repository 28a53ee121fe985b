// Command mutate is the safety-condition audit: it removes each of
// leasehold's safety conditions in turn (the liveness and token conditions
// of the fenced completion, the renewal's expiry checks, the fetch's
// per-key order, ...; the list is Conditions), runs the tests that must
// catch its removal, expects them to fail, and restores the file. It
// prints one line per condition and exits non-zero if any removal
// survived (every test passed) or could not be made.
//
// Run it on demand, from the module root, against a PostgreSQL:
//
//	LEASEHOLD_TEST_DATABASE_URL=postgres://... go run ./internal/mutate [-only regexp] [-list]
//
// It is not part of CI (it takes several minutes: one test run per
// condition). It edits the working tree while it runs: a removal is the
// replacement text followed by a marker comment, and restoring swaps that
// marked text back, leaving any other edit to the file alone. It restores
// on return, on SIGINT, SIGTERM and SIGHUP, and, at its start, any marked
// text a killed run left behind. See docs/reliability.md.
package main
