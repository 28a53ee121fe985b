// Package migrations holds leasehold's versioned schema migrations, embedded
// in the binary, and applies them under an advisory lock so that several
// processes may migrate at once.
package migrations
