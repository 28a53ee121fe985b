// Package pgcluster starts and stops throwaway PostgreSQL clusters from the
// PostgreSQL server binaries installed on the machine. The test harness, the
// demo and the benchmarks use it when no database URL is given.
package pgcluster
