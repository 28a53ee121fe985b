package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

const (
	begin = "<!-- BEGIN GENERATED: go run ./internal/archgraph -w -->"
	end   = "<!-- END GENERATED -->"
	doc   = "docs/architecture.md"
)

func main() {
	write := flag.Bool("w", false, "rewrite the generated section of "+doc)
	flag.Parse()
	if err := run(".", *write, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "archgraph:", err)
		os.Exit(1)
	}
}

// run loads the graph of the module in dir, checks its layering, and
// prints the generated section or writes it into the doc.
func run(dir string, write bool, out io.Writer) error {
	g, err := load(dir)
	if err != nil {
		return err
	}
	if v := g.violations(); len(v) > 0 {
		return fmt.Errorf("layering violated:\n  %s", strings.Join(v, "\n  "))
	}
	section := render(g)
	if !write {
		_, err := io.WriteString(out, section)
		return err
	}
	path := filepath.Join(dir, doc)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := replace(b, section)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, updated, 0o644)
}

// replace puts section between the markers of b.
func replace(b []byte, section string) ([]byte, error) {
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return nil, errors.New("no generated section (markers " + begin + " ... " + end + ")")
	}
	var out bytes.Buffer
	out.Write(b[:i+len(begin)])
	out.WriteString("\n" + section)
	out.Write(b[j:])
	return out.Bytes(), nil
}

// current returns the generated section of doc b.
func current(b []byte) (string, error) {
	i, j := bytes.Index(b, []byte(begin)), bytes.Index(b, []byte(end))
	if i < 0 || j < i {
		return "", errors.New("no generated section")
	}
	return strings.TrimPrefix(string(b[i+len(begin):j]), "\n"), nil
}

// render draws the graph, without its implied edges and hidden packages,
// as a Mermaid flowchart, ranked bottom to top, and lists every package
// with its layer.
func render(g graph) string {
	r := g.ranks()
	red := g.reduced()
	var b strings.Builder
	b.WriteString("```mermaid\nflowchart BT\n")
	id := func(n string) string {
		return strings.NewReplacer("/", "_", ".", "root").Replace(n)
	}
	label := func(n string) string {
		if n == "." {
			return "leasehold (DB)"
		}
		return n
	}
	for _, n := range g.names() {
		if hidden[n] {
			continue
		}
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", id(n), label(n))
	}
	for _, n := range red.names() {
		if hidden[n] {
			continue
		}
		for _, d := range red[n] {
			if !hidden[d] {
				fmt.Fprintf(&b, "  %s --> %s\n", id(n), id(d))
			}
		}
	}
	b.WriteString("```\n\n| layer | package | imports (in the module) |\n|---|---|---|\n")
	names := g.names()
	sortByRank(names, r)
	for _, n := range names {
		var labels []string
		for _, d := range g[n] {
			labels = append(labels, label(d))
		}
		deps := strings.Join(labels, ", ")
		if deps == "" {
			deps = "—"
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s |\n", r[n], label(n), deps)
	}
	return b.String()
}

func sortByRank(names []string, r map[string]int) {
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && (r[names[j]] < r[names[j-1]] || r[names[j]] == r[names[j-1]] && names[j] < names[j-1]); j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
}
