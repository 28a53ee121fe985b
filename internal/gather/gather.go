package gather

import "sync"

// Batcher sends its items in batches: Add sends an item at once when no
// send runs, and the items added while one runs are sent together by the
// next. A goroutine runs only while items wait. The zero value is not
// usable: set Send.
type Batcher[A any] struct {
	// Take splits the pending items, in the order they were added, into
	// the next batch and the items left for later batches (it may also
	// answer and leave out items nobody waits for any more). Nil takes
	// every item.
	Take func(pending []*A) (batch, rest []*A)
	// Send sends one batch and answers its items.
	Send func(batch []*A)

	mu      sync.Mutex
	pending []*A
	running bool
}

// Add queues a for the next batch; its answer is Send's to give.
func (b *Batcher[A]) Add(a *A) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, a)
	if !b.running {
		b.running = true
		go b.loop()
	}
}

// loop sends batches until nothing is pending.
func (b *Batcher[A]) loop() {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch, rest := b.pending, []*A(nil)
		if b.Take != nil {
			batch, rest = b.Take(b.pending)
		}
		b.pending = rest
		b.mu.Unlock()
		if len(batch) > 0 {
			b.Send(batch)
		}
	}
}
