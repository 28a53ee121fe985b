package queue

import "sync"

// A batcher sends the asks of a Processor's grants for one statement
// together: the first ask after a quiet spell is sent at once, and the
// asks that come while a statement runs are sent together by the next one.
// A statement takes the asks of one group, each partition at most once
// (two grants of one partition, the old one ending as the new one starts,
// go to two statements), at most max of them. An ask whose asker stopped
// waiting is dropped unsent. A goroutine runs only while asks wait.
//
// The opener and the closer of runs use it (see opener.go): the grants of
// a member start together (a start, a rebalance: one claim statement wins
// many partitions) and end together (a Stop, a rebalance).
type batcher[A any] struct {
	max int
	// of returns an ask's group and partition, and a channel closed when
	// its asker stopped waiting.
	of func(a *A) (group string, part int, gone <-chan struct{})
	// send sends one statement for as, all of group, and answers them.
	send func(group string, as []*A)
	// drop answers an ask dropped unsent.
	drop func(a *A)

	mu      sync.Mutex
	asks    []*A
	running bool
}

// add queues a; the caller waits for its answer.
func (b *batcher[A]) add(a *A) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asks = append(b.asks, a)
	if !b.running {
		b.running = true
		go b.loop()
	}
}

// loop sends the asks until none is left.
func (b *batcher[A]) loop() {
	for {
		b.mu.Lock()
		if len(b.asks) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		group, _, _ := b.of(b.asks[0])
		var take []*A
		parts := make(map[int]bool)
		rest := b.asks[:0]
		for _, a := range b.asks {
			g, part, gone := b.of(a)
			switch {
			case isClosed(gone):
				b.drop(a)
			case g == group && !parts[part] && len(take) < b.max:
				parts[part] = true
				take = append(take, a)
			default:
				rest = append(rest, a)
			}
		}
		b.asks = rest
		b.mu.Unlock()
		if len(take) > 0 {
			b.send(group, take)
		}
	}
}
