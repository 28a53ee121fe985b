package main

import (
	"fmt"
	"slices"
)

// rank places the packages of the import graph the issue "one house plan"
// fixed: fence <- store <- the DB handle <- lease <- partition <-
// {queue, kafka} <- periodic <- worker <- cmd. A package may import only packages of a
// lower rank. Packages not listed get the rank their imports give them (one
// above the highest), so a helper sits wherever it must, and a listed
// package importing a helper that reaches above it is caught.
var rank = map[string]int{
	"fence":          1,
	"internal/store": 2,
	".":              3,
	"lease":          4,
	"partition":      5,
	"queue":          6,
	"kafka":          6,
	"periodic":       7,
	"worker":         8,
	"cmd/leasehold":  99, // the top: it may import anything
}

// hidden are left out of the diagram: test harnesses and tools.
var hidden = map[string]bool{
	"internal/archgraph": true, "internal/pgtest": true, "internal/pgcluster": true,
	"internal/fakeclock": true, "internal/netproxy": true,
}

// ranks returns every package's rank: its listed one, or one above the
// highest of its imports.
func (g graph) ranks() map[string]int {
	r := map[string]int{}
	var of func(n string, path []string) int
	of = func(n string, path []string) int {
		if v, ok := r[n]; ok {
			return v
		}
		if v, ok := rank[n]; ok {
			r[n] = v
			return v
		}
		if slices.Contains(path, n) {
			return 0 // a cycle: go list would have refused it
		}
		v := 0
		for _, d := range g[n] {
			v = max(v, of(d, append(path, n))+1)
		}
		r[n] = v
		return v
	}
	for _, n := range g.names() {
		of(n, nil)
	}
	return r
}

// violations lists the imports of listed packages that do not go down
// the layers.
func (g graph) violations() []string {
	r := g.ranks()
	var out []string
	for _, n := range g.names() {
		own, listed := rank[n]
		if !listed {
			continue
		}
		for _, d := range g[n] {
			if r[d] >= own {
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", n, own, d, r[d]))
			}
		}
	}
	return out
}
