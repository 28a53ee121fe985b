package main

import (
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestZZProbe(t *testing.T) {
	url := pgtest.URL(t)
	for _, args := range append(adminCommands, []string{"status", "--group", "g"}) {
		out, err := runIn(t, "", append(args, "--database-url", url)...)
		t.Logf("%v: out=%q err=%v", args, out, err)
	}
	for _, args := range [][]string{{"jobs", "list", "--group", "g", "--limit", "0"}, {"jobs", "list", "--group", "g", "--partition", "x"}, {"jobs", "show"}, {"enqueue", "--group", "g", "--kind", "k", "--key", "\xff"}} {
		out, err := runIn(t, "", append(args, "--database-url", url)...)
		t.Logf("%v: out=%q err=%v", args, out, err)
	}
	out, err := runIn(t, "", "status", "--database-url", url+"x")
	t.Logf("nodb: out=%q err=%v", out, err)
}
