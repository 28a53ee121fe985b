package gather

import (
	"sync"
	"testing"
	"time"
)

// Items added while a send runs go together in the next send; an item
// added when nothing runs goes at once. Take splits a batch (the control:
// with a Take of one item, every item is a send of its own).
func TestItemsAddedDuringASendShareTheNext(t *testing.T) {
	for _, one := range []bool{false, true} {
		var mu sync.Mutex
		var sends [][]int
		release := make(chan struct{})
		done := make(chan struct{}, 8)
		b := &Batcher[int]{Send: func(batch []*int) {
			mu.Lock()
			var got []int
			for _, x := range batch {
				got = append(got, *x)
			}
			first := len(sends) == 0
			sends = append(sends, got)
			mu.Unlock()
			if first {
				<-release // the first send runs while the others are added
			}
			for range batch {
				done <- struct{}{}
			}
		}}
		if one {
			b.Take = func(p []*int) ([]*int, []*int) { return p[:1], p[1:] }
		}
		for i := range 4 {
			x := i
			b.Add(&x)
			if i == 0 {
				for { // the first send has started
					mu.Lock()
					n := len(sends)
					mu.Unlock()
					if n == 1 {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
		}
		close(release)
		for range 4 {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("an item was never sent")
			}
		}
		mu.Lock()
		n := len(sends)
		mu.Unlock()
		switch {
		case !one && n != 2:
			t.Fatalf("4 items, 3 of them added during the first send: %d sends %v; want 2", n, sends)
		case one && n != 4:
			t.Fatalf("control, a Take of one: %d sends %v; want 4", n, sends)
		}
	}
}
