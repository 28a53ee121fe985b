package chaos

import (
	"testing"
	"time"
)

// A closed gate holds the runs that reach it, records them, and lets them
// all go when opened; an open gate holds nothing.
func TestGateHoldsRunsUntilOpened(t *testing.T) {
	g := NewGate()
	g.Pass(HandlerRun{Job: 1}) // open: returns at once
	g.Close()
	passed := make(chan int64, 2)
	for _, job := range []int64{2, 3} {
		go func() {
			g.Pass(HandlerRun{Job: job})
			passed <- job
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(g.Held()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("held %v; want jobs 2 and 3", g.Held())
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case j := <-passed:
		t.Fatalf("job %d passed a closed gate", j)
	case <-time.After(50 * time.Millisecond):
	}
	if held := g.Open(); len(held) != 2 {
		t.Fatalf("Open returned %v; want the 2 held runs", held)
	}
	for range 2 {
		select {
		case <-passed:
		case <-time.After(5 * time.Second):
			t.Fatal("a held run did not pass the opened gate")
		}
	}
}

// A paused clock stands still while real time passes; resumed, it catches
// up by the time it stood still.
func TestPausableClockStandsStillWhilePaused(t *testing.T) {
	c := NewPausableClock()
	defer c.Close()
	c.Pause()
	before := c.Now()
	time.Sleep(150 * time.Millisecond)
	if d := c.Now().Sub(before); d != 0 {
		t.Fatalf("a paused clock moved by %v", d)
	}
	if stood := c.Resume(); stood < 150*time.Millisecond {
		t.Fatalf("stood still %v; want at least 150ms", stood)
	}
	if d := c.Now().Sub(before); d < 150*time.Millisecond {
		t.Fatalf("the resumed clock caught up by %v only", d)
	}
}
