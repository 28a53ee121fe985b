package admin

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// A line of `batch submit` is an item with its kind, key, args (default
// {}) and attempt limit; a malformed one is refused, naming why.
func TestParseItem(t *testing.T) {
	it, err := parseItem([]byte(`{"item":"user-42","kind":"reprice","key":"k","args":{"user":42},"max_attempts":3,"priority":2}`))
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(it.Args)
	if it.ID != "user-42" || it.Args.Kind() != "reprice" || it.Key != "k" || string(args) != `{"user":42}` || it.MaxAttempts != 3 || it.Priority != 2 {
		t.Fatalf("parsed as %+v, args %s", it, args)
	}
	for _, in := range []string{`{"item":"a","kind":"k"}`, `{"item":"a","kind":"k","args":null}`} {
		it, err := parseItem([]byte(in))
		args, _ := json.Marshal(it.Args)
		if err != nil || string(args) != "{}" {
			t.Errorf("%s: args %s (%v); want {}", in, args, err)
		}
	}
	for in, want := range map[string]string{
		`{"kind":"k"}`:                              "no item",
		`{"item":"","kind":"k"}`:                    "no item",
		`{"item":"a"}`:                              "no kind",
		`{"item":"a","kind":"k","foo":1}`:           `unknown field "foo"`,
		`{"item":"a","kind":"k","args":5}`:          "args 5: not a JSON object",
		`{"item":"a","kind":"k","args":[1]}`:        "args [1]: not a JSON object",
		`{"item":"a","kind":"k","args":{"a":}}`:     "invalid JSON",
		`{"item":"a","kind":"k","max_attempts":-1}`: "max_attempts -1 is not in 0..",
		`{"item":"a","kind":"k","priority":5}`:      "priority 5 is not in 1..4",
		`["a","k"]`:                                 "not a JSON object",
		`{"item":"a","kind":"k"} {}`:                "more than one value",
	} {
		if _, err := parseItem([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error about %q", in, err, want)
		}
	}
}

// The rate of successive reads is the items finished between the oldest
// and the newest read of the window over the time between them; before a
// second read, and once nothing is pending, the average since creation.
func TestRateMeter(t *testing.T) {
	created := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	sealed := created
	read := func(s int, total, pending int64) queue.BatchInfo {
		return queue.BatchInfo{CreatedAt: created, SealedAt: &sealed, Total: total, Pending: pending,
			ReadAt: created.Add(time.Duration(s) * time.Second)}
	}
	m := RateMeter{Span: 2 * time.Second}
	if r := m.Add(read(10, 1000, 900)); r != 10 { // 100 in 10 s since creation
		t.Errorf("first read: rate %v; want the average, 10", r)
	}
	if r := m.Add(read(11, 1000, 850)); r != 50 {
		t.Errorf("second read: rate %v; want 50 (50 in 1 s)", r)
	}
	if r := m.Add(read(12, 1000, 750)); r != 75 {
		t.Errorf("third read: rate %v; want 75 (150 in 2 s)", r)
	}
	if r := m.Add(read(13, 1000, 750)); r != 50 { // the window drops the first read
		t.Errorf("fourth read: rate %v; want 50 (100 in 2 s: the read of 10 s is older than the span)", r)
	}
	if r := m.Add(read(14, 1000, 800)); r != 0 { // a retry put items back
		t.Errorf("after a retry: rate %v; want 0", r)
	}
	finished := created.Add(20 * time.Second)
	done := read(100, 1000, 0)
	done.FinishedAt = &finished
	if r := m.Add(done); r != 50 { // 1000 in the 20 s to its finish, not the 100 s to the read
		t.Errorf("finished: rate %v; want 50", r)
	}
	// Measure says which rates are measurements: not the first read's
	// average, nor a window that saw no item finish (whose 0 would show a
	// running batch as "–"), however full.
	m = RateMeter{Span: 2 * time.Second}
	for i, c := range []struct {
		s        int
		pending  int64
		rate     float64
		measured bool
	}{
		{10, 900, 10, false}, // the average: 100 in 10 s
		{11, 900, 0, false},  // nothing finished in 1 s: no measurement yet
		{12, 850, 25, true},  // 50 in 2 s
		{13, 850, 25, true},  // the window (11..13) saw 50 finish
		{14, 850, 0, false},  // a full window (12..14) without progress
		{15, 800, 25, true},  // 50 in 2 s (13..15)
	} {
		r, ok := m.Measure(read(c.s, 1000, c.pending))
		if r != c.rate || ok != c.measured {
			t.Errorf("read %d: Measure = %v, %v; want %v, %v", i, r, ok, c.rate, c.measured)
		}
	}
	// Reads arriving out of order (concurrent requests) take their place
	// by ReadAt: the rate spans the oldest to the newest read.
	m = RateMeter{Span: 10 * time.Second}
	m.Add(read(10, 1000, 900))
	m.Add(read(12, 1000, 700))
	if r := m.Add(read(11, 1000, 850)); r != 100 { // 200 from 10 s to 12 s, not 50 from 10 s to the late 11 s
		t.Errorf("a late read: rate %v; want 100 (200 in 2 s)", r)
	}
	// Many readers (tabs) make the window denser, not shorter: 100 reads
	// within a second still measure over the span since 10 s.
	for i := range 100 {
		b := read(13, 1000, 600)
		b.ReadAt = b.ReadAt.Add(time.Duration(i) * time.Millisecond)
		m.Add(b)
	}
	if r, ok := m.Measure(read(14, 1000, 600)); r != 75 || !ok { // 300 in 4 s
		t.Errorf("after 100 reads in a second: rate %v, %v; want 75 (300 in the 4 s since the first read), measured", r, ok)
	}
	v := ViewOf(read(10, 1000, 900), 0)
	if v.ETASeconds != nil {
		t.Errorf("no rate: ETA %v; want unknown (null)", *v.ETASeconds)
	}
	if v = ViewOf(read(10, 1000, 900), 100); v.ETASeconds == nil || *v.ETASeconds != 9 {
		t.Errorf("900 pending at 100/s: ETA %v; want 9 s", v.ETASeconds)
	}
}
