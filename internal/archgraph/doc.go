// Command archgraph draws leasehold's package import graph from `go list`
// and checks its layering. `go run ./internal/archgraph -w` rewrites the
// generated section of docs/architecture.md; its test fails when that
// section is out of date, or when a package imports one above its layer.
package main
