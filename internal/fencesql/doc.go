// Package fencesql holds the fence package's SQL, shared with the
// benchmarks' raw-SQL systems so that both run the very same statements.
package fencesql
