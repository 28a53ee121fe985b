package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// module is leasehold's module path.
const module = "github.com/leasehold/leasehold"

// graph maps each package (its path inside the module, "." for the root)
// to the packages of the module it imports, in non-test files.
type graph map[string][]string

// load runs `go list -json ./...` in dir and returns the module's import
// graph, without examples.
func load(dir string) (graph, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("go list: %v: %s", err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list: %w", err)
	}
	return parse(strings.NewReader(string(out)))
}

// parse reads the JSON stream of `go list -json`.
func parse(r io.Reader) (graph, error) {
	g := graph{}
	dec := json.NewDecoder(r)
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		name := short(p.ImportPath)
		if name == "" || strings.HasPrefix(name, "examples") {
			continue
		}
		deps := []string{}
		for _, imp := range p.Imports {
			if d := short(imp); d != "" {
				deps = append(deps, d)
			}
		}
		slices.Sort(deps)
		g[name] = deps
	}
	return g, nil
}

// short returns path inside the module ("." for the root), or "" for a
// package outside it.
func short(path string) string {
	switch {
	case path == module:
		return "."
	case strings.HasPrefix(path, module+"/"):
		return strings.TrimPrefix(path, module+"/")
	}
	return ""
}

// names returns the graph's packages, sorted.
func (g graph) names() []string {
	var ns []string
	for n := range g {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// reaches reports whether from reaches to through at least one edge.
func (g graph) reaches(from, to string, skipDirect bool) bool {
	seen := map[string]bool{}
	var walk func(n string, depth int) bool
	walk = func(n string, depth int) bool {
		for _, d := range g[n] {
			if depth == 0 && skipDirect && d == to {
				continue
			}
			if d == to {
				return true
			}
			if !seen[d] {
				seen[d] = true
				if walk(d, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(from, 0)
}

// reduced returns g without the edges implied by longer paths (its
// transitive reduction, for an acyclic graph): the diagram shows layers,
// not every import.
func (g graph) reduced() graph {
	r := graph{}
	for _, n := range g.names() {
		r[n] = []string{}
		for _, d := range g[n] {
			if !g.reaches(n, d, true) {
				r[n] = append(r[n], d)
			}
		}
	}
	return r
}
