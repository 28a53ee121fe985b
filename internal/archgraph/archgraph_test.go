package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// The import graph goes down the layers: fence <- store <- the DB handle <-
// lease <- partition <- {queue, kafka} <- worker <- cmd.
func TestLayering(t *testing.T) {
	g, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fence", "lease", "partition", "queue", "kafka", "worker", "internal/store"} {
		if _, ok := g[want]; !ok {
			t.Fatalf("go list found no package %s: %v", want, g.names())
		}
	}
	if v := g.violations(); len(v) > 0 {
		t.Fatalf("imports that go up the layers:\n%s", strings.Join(v, "\n"))
	}
	if len(g["fence"]) != 0 {
		t.Errorf("fence imports %v; it must be a leaf", g["fence"])
	}
}

// The negative control: an upward import (fence importing lease, queue
// importing kafka, lease importing worker through a helper) is caught.
func TestLayeringCatchesUpwardImports(t *testing.T) {
	base := graph{
		"fence": {}, "internal/store": {"fence"}, ".": {"internal/store"}, "lease": {".", "fence"},
		"partition": {"lease"}, "queue": {"partition"}, "kafka": {"partition"}, "worker": {"kafka", "queue"},
		"internal/helper": {"worker"},
	}
	if v := base.violations(); len(v) != 0 {
		t.Fatalf("the base graph is layered, got %v", v)
	}
	for name, edit := range map[string]func(graph){
		"fence imports lease":      func(g graph) { g["fence"] = []string{"lease"} },
		"queue imports kafka":      func(g graph) { g["queue"] = []string{"kafka", "partition"} },
		"lease imports via helper": func(g graph) { g["lease"] = []string{".", "internal/helper"} },
		"store imports the handle": func(g graph) { g["internal/store"] = []string{"."} },
	} {
		g := graph{}
		for k, v := range base {
			g[k] = slices.Clone(v)
		}
		edit(g)
		if v := g.violations(); len(v) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

// docs/architecture.md shows the current graph: regenerate it with
// `go run ./internal/archgraph -w` after changing imports.
func TestDocIsCurrent(t *testing.T) {
	g, err := load(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	got, err := current(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := render(g); got != want {
		t.Fatalf("%s is out of date: run `go run ./internal/archgraph -w`.\nwant:\n%s\ngot:\n%s", doc, want, got)
	}
	// The control: a changed graph does not match.
	g["fence"] = append(g["fence"], "lease")
	if render(g) == got {
		t.Fatal("render ignores a changed graph")
	}
}
