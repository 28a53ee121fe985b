package ui

import (
	"testing"
	"time"
)

// TestAgeAndDuration checks the ages and durations the pages show: a
// heartbeat read slightly in the future (the database clock rounds) is
// "now", not " ago" with no number, and no duration renders as "".
func TestAgeAndDuration(t *testing.T) {
	for _, c := range []struct {
		d         time.Duration
		age, dura string
	}{
		{-3 * time.Millisecond, "now", "-3ms"},
		{-999 * time.Millisecond, "now", "-999ms"},
		{-time.Second, "in 1s", "-1s"},
		{-90 * time.Second, "in 1m", "-1m"},
		{0, "0ms ago", "0ms"},
		{850 * time.Millisecond, "850ms ago", "850ms"},
		{12 * time.Second, "12s ago", "12s"},
		{3 * time.Hour, "3h ago", "3h"},
	} {
		if got := age(c.d); got != c.age {
			t.Errorf("age(%v) = %q; want %q", c.d, got, c.age)
		}
		if got := duration(c.d); got != c.dura {
			t.Errorf("duration(%v) = %q; want %q", c.d, got, c.dura)
		}
	}
}
