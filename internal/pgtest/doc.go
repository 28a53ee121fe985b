// Package pgtest gives each test its own PostgreSQL database on a real
// server: the one named by LEASEHOLD_TEST_DATABASE_URL when set, otherwise a
// throwaway cluster started once per test binary from the installed
// PostgreSQL binaries and removed when the binary ends.
//
// A test's migrated database ([MigratedURL], [Pool]) is a copy (CREATE
// DATABASE ... TEMPLATE) of a template database migrated once per test
// binary, dropped by [Run]; [URL] gives an empty one.
//
// Every test package using it calls [Run] from TestMain.
package pgtest
