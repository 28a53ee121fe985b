package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every condition's text is in its file exactly once, and its removal
// changes it: the list is current (a condition whose text moved would be
// reported STALE by a run, which this catches at once, without a
// database).
func TestConditionsAreCurrent(t *testing.T) {
	for _, c := range Conditions {
		src, err := os.ReadFile(filepath.Join("..", "..", c.File))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), c.From); n != 1 {
			t.Errorf("%s: its text is in %s %d times; want once", c.Name, c.File, n)
		}
		if c.From == c.To || len(c.Tests) == 0 || c.Pkg == "" {
			t.Errorf("%s: no removal, or no tests to catch it", c.Name)
		}
	}
}

// A removal is undone by unmark, and other edits made to the file while it
// was in effect survive the restore.
func TestUnmarkRestoresOnlyTheRemoval(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.go")
	orig := "a\nWHERE x AND y\nb\n"
	c := Condition{File: f, From: "WHERE x AND y\n", To: "WHERE x\n"}
	mutated := strings.Replace(orig, c.From, c.To+marker, 1) + "edited meanwhile\n"
	if err := os.WriteFile(f, []byte(mutated), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := unmark(c); n != 1 || err != nil {
		t.Fatalf("unmark = %d, %v; want 1, nil", n, err)
	}
	got, _ := os.ReadFile(f)
	if string(got) != orig+"edited meanwhile\n" {
		t.Fatalf("after unmark: %q", got)
	}
	if n, err := unmark(c); n != 0 || err != nil {
		t.Fatalf("second unmark = %d, %v; want 0, nil", n, err)
	}
}

func TestResults(t *testing.T) {
	failed, passed := results("=== RUN   TestA\n--- FAIL: TestA (1.0s)\n    --- FAIL: TestA/sub (0.1s)\n--- PASS: TestB (0.2s)\nFAIL\n")
	if !failed["TestA"] || failed["TestA/sub"] || !passed["TestB"] || len(failed) != 1 {
		t.Fatalf("results = %v, %v", failed, passed)
	}
}
