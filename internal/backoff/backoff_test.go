package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestDelayIsCappedJitteredAndGrows(t *testing.T) {
	b := New(10*time.Millisecond, time.Second, rand.New(rand.NewPCG(1, 2)))
	for attempt := range 100 {
		ceil := min(time.Second, 10*time.Millisecond<<min(attempt, 10))
		var maxSeen time.Duration
		for range 200 {
			d := b.Delay(attempt)
			if d < 0 || d >= ceil {
				t.Fatalf("Delay(%d) = %v, want in [0, %v)", attempt, d, ceil)
			}
			maxSeen = max(maxSeen, d)
		}
		// Full jitter: over 200 draws the largest must come near the ceiling.
		if maxSeen < ceil*8/10 {
			t.Fatalf("Delay(%d): max of 200 draws %v, want near %v (jitter not full?)", attempt, maxSeen, ceil)
		}
	}
}

func TestDelayIsDeterministicForASeed(t *testing.T) {
	a := New(time.Millisecond, time.Second, rand.New(rand.NewPCG(7, 7)))
	b := New(time.Millisecond, time.Second, rand.New(rand.NewPCG(7, 7)))
	for i := range 50 {
		if x, y := a.Delay(i%12), b.Delay(i%12); x != y {
			t.Fatalf("same seed, draw %d: %v != %v", i, x, y)
		}
	}
}
