package queue

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// The opener records the runs of the grants that start together (a
// member's start, a rebalance: partition.Member grants all the partitions
// one claim statement won at once) in one statement per group
// (queueOpenRun), instead of one per grant: the first ask after a quiet
// spell is sent at once, and the asks that come while a statement runs are
// sent together by the next one, as the fetcher does. (One statement per
// grant was the largest cost of 64 workers starting together: 1,063 of
// them, 6.8 s of the server's time, queued on each worker's pool.)
//
// A goroutine runs only while asks wait.

// maxOpenPartitions bounds the grants one statement opens.
const maxOpenPartitions = 256

// openTimeout bounds one open statement.
const openTimeout = 30 * time.Second

// openAsk is one grant's ask and, once done is closed, its answer.
type openAsk struct {
	o    partition.Ownership
	prev *int64 // the token recorded before (nil: none)
	open bool   // that run was still open: it ended abruptly
	// recorded reports that o's grant was recorded (false: a newer one is).
	recorded bool
	err      error
	done     chan struct{}
	gone     <-chan struct{} // the asker stopped waiting (its ctx ended)
}

type opener struct {
	p *Processor

	mu      sync.Mutex
	asks    []*openAsk
	running bool
}

// open records o's run, with the other grants' that ask meanwhile, and
// waits for the answer or ctx's end.
func (op *opener) open(ctx context.Context, o partition.Ownership) (prev *int64, open, recorded bool, err error) {
	a := &openAsk{o: o, done: make(chan struct{}), gone: ctx.Done()}
	op.mu.Lock()
	op.asks = append(op.asks, a)
	if !op.running {
		op.running = true
		go op.loop()
	}
	op.mu.Unlock()
	select {
	case <-a.done:
		return a.prev, a.open, a.recorded, a.err
	case <-ctx.Done():
		return nil, false, false, ctx.Err()
	}
}

// loop sends the asks, a statement per group (each partition once per
// statement), until none is left.
func (op *opener) loop() {
	for {
		op.mu.Lock()
		if len(op.asks) == 0 {
			op.running = false
			op.mu.Unlock()
			return
		}
		group := op.asks[0].o.Group
		var take []*openAsk
		parts := make(map[int]bool)
		rest := op.asks[:0]
		for _, a := range op.asks {
			switch {
			case isClosed(a.gone):
				close(a.done) // nobody reads the answer
			case a.o.Group == group && !parts[a.o.Partition] && len(take) < maxOpenPartitions:
				parts[a.o.Partition] = true
				take = append(take, a)
			default:
				rest = append(rest, a)
			}
		}
		op.asks = rest
		op.mu.Unlock()
		if len(take) > 0 {
			op.send(group, take)
		}
	}
}

// send runs one statement for the asks as, all of group, and answers them.
func (op *opener) send(group string, as []*openAsk) {
	parts := make([]int32, len(as))
	tokens := make([]int64, len(as))
	owners := make([]string, len(as))
	byPart := make(map[int32]*openAsk, len(as))
	for i, a := range as {
		parts[i], tokens[i], owners[i] = int32(a.o.Partition), int64(a.o.Token), ownerOf(a.o)
		byPart[parts[i]] = a
	}
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	rows, err := op.p.pool.Query(ctx, op.p.q.OpenRun, group, parts, tokens, owners)
	if err == nil {
		for rows.Next() {
			var part int32
			var prev *int64
			var open, recorded bool
			if err = rows.Scan(&part, &prev, &open, &recorded); err != nil {
				break
			}
			if a := byPart[part]; a != nil {
				a.prev, a.open, a.recorded = prev, open, recorded
				delete(byPart, part)
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, a := range as {
		switch {
		case err != nil:
			a.prev, a.open, a.recorded, a.err = nil, false, false, err
		case byPart[int32(a.o.Partition)] == a: // no row: never taken for a newer grant's
			a.err = fmt.Errorf("queue: open the run of partition %d of %q: no row returned", a.o.Partition, group)
		}
		close(a.done)
	}
}
