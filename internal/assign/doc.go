// Package assign computes partition owners with consistent hashing with
// bounded loads (github.com/buraksezer/consistent v1.0.0 over XXH64). Package
// partition uses it with fixed parameters; the benchmarks sweep them.
package assign
