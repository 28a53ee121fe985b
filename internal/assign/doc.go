// Package assign computes partition owners with consistent hashing with
// bounded loads: exactly the owners github.com/buraksezer/consistent v1.0.0
// computes over XXH64 (its tests compare the two), building the ring once
// instead of once per member. Package partition uses it with fixed
// parameters; the benchmarks sweep them.
package assign
