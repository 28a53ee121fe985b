package history

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestCheckAcceptsAValidHistory(t *testing.T) {
	vs := []Version{
		{1, "a", "w1", 10, at(0), at(1000)},
		{2, "a", "w1", 10, at(0), at(1500)}, // renewal
		{3, "b", "w2", 11, at(10), at(1010)},
		{4, "a", "w1", 10, at(0), at(1200)}, // release at 1200
		{5, "a", "w2", 12, at(1200), at(2200)},
		{6, "a", "w3", 20, at(2300), at(3300)}, // after expiry
	}
	r := Check(vs)
	if !r.OK() || r.Grants != 4 || r.Names != 2 {
		t.Fatalf("Check = %+v; want OK with 4 grants over 2 names", r)
	}
}

// Negative controls: each history breaks one invariant and must be flagged.
func TestCheckFlagsViolations(t *testing.T) {
	for _, tc := range []struct {
		name string
		vs   []Version
		want string
	}{
		{"overlap", []Version{
			{1, "a", "w1", 10, at(0), at(1000)},
			{2, "a", "w2", 11, at(500), at(1500)},
		}, "overlap"},
		{"token decreases", []Version{
			{1, "a", "w1", 10, at(0), at(100)},
			{2, "a", "w2", 9, at(200), at(300)},
		}, "granted after"},
		{"token reused", []Version{
			{1, "a", "w1", 10, at(0), at(100)},
			{2, "a", "w2", 11, at(200), at(300)},
			{3, "a", "w1", 10, at(400), at(500)},
		}, "granted twice"},
	} {
		r := Check(tc.vs)
		if r.OK() || !strings.Contains(strings.Join(r.Violations, "\n"), tc.want) {
			t.Errorf("%s: Check = %+v; want a violation mentioning %q", tc.name, r, tc.want)
		}
	}
}

func TestCheckCountsSameOwnerSupersessionApart(t *testing.T) {
	r := Check([]Version{
		{1, "a", "w1", 10, at(0), at(1000)},
		{2, "a", "w1", 12, at(300), at(1300)}, // same owner re-acquired
	})
	if !r.OK() || r.Superseded != 1 {
		t.Fatalf("Check = %+v; want OK with 1 superseded grant", r)
	}
}
