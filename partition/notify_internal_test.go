package partition

import (
	"slices"
	"strings"
	"testing"
)

// A release's payload names its partitions as ranges, parsed back to the
// same set; an empty or too long list is the group's name alone (which
// wakes every member); another group's payload, and a group whose name is
// a prefix of it, are not this group's releases.
func TestReleasePayloadRoundTrips(t *testing.T) {
	expand := func(rs [][2]int) []int {
		var out []int
		for _, r := range rs {
			for p := r[0]; p <= r[1]; p++ {
				out = append(out, p)
			}
		}
		return out
	}
	for _, c := range []struct {
		parts []int
		want  string
	}{
		{[]int{7}, "g\n7"},
		{[]int{19, 3, 17, 18, 3}, "g\n3,17-19"},
		{[]int{0, 1, 2, 3, 5, 7, 8}, "g\n0-3,5,7-8"},
	} {
		got := releasePayload("g", c.parts)
		if got != c.want {
			t.Errorf("releasePayload(%v) = %q; want %q", c.parts, got, c.want)
		}
		rs, ok := releasedParts(got, "g")
		want := slices.Compact(slices.Sorted(slices.Values(c.parts)))
		if !ok || !slices.Equal(expand(rs), want) {
			t.Errorf("releasedParts(%q) = %v, %v; want %v", got, expand(rs), ok, want)
		}
	}
	var every []int
	for p := 0; p < MaxPartitions; p += 2 {
		every = append(every, p)
	}
	if got := releasePayload("g", every); got != "g" {
		t.Errorf("a payload of %d scattered partitions is %d bytes; want the group's name alone", len(every), len(got))
	}
	if got := releasePayload("g", nil); got != "g" {
		t.Errorf("releasePayload of none = %q; want the group's name", got)
	}
	for _, c := range []struct {
		payload, group string
		ok, parsed     bool
	}{
		{"g", "g", false, false},
		{"h\n1", "g", false, false},
		{"g\n1", "g\n1", false, false}, // the name alone of a group named "g\n1"
		{"gg\n1", "g", false, false},
		{"g\n1-x", "g", true, false},
		{"g\n3-1", "g", true, false},
		{"g\n-1", "g", true, false},
		{"g\n" + strings.Repeat("1,", 3) + "2", "g", true, true},
	} {
		rs, ok := releasedParts(c.payload, c.group)
		if ok != c.ok || (rs != nil) != c.parsed {
			t.Errorf("releasedParts(%q, %q) = %v, %v; want ok %v, parsed %v", c.payload, c.group, rs, ok, c.ok, c.parsed)
		}
	}
}
