package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/gather"
	"github.com/leasehold/leasehold/partition"
)

// The runs of a Processor's grants are opened (queueOpenRun) and closed
// (queueCloseRun) by one statement per group for the grants that start, or
// end, together (gather.Batcher: the first at once, the ones that ask while
// a statement runs together in the next), instead of one per grant: the
// grants of a member start together (a start, a rebalance: one claim
// statement wins many partitions) and end together (a Stop, a rebalance).
// One per grant was the largest cost of 64 workers starting together
// (1,063 open statements, 6.8 s of the server's time, queued on each
// worker's pool).

// maxRunPartitions bounds the grants one open or close statement names.
const maxRunPartitions = 256

// runTimeout bounds one open or close statement.
const runTimeout = 30 * time.Second

// runAsk is one grant's ask to open or close its run and, once done is
// closed, its answer.
type runAsk struct {
	o    partition.Ownership
	prev *int64 // open: the token recorded before (nil: none)
	open bool   // open: that run was still open, it ended abruptly
	// recorded reports that o's grant was recorded (open; false: a newer
	// one is).
	recorded bool
	// rate: close: the run's recent starts to hand over (nil: none);
	// open: those the previous run handed over, written since
	// microseconds ago.
	rate  []byte
	since int64
	err   error
	done  chan struct{}
	gone  <-chan struct{} // the asker stopped waiting (its ctx ended)
}

// runBatcher returns the batcher of the open or close statements: a
// statement takes the asks of one group, each partition at most once (two
// grants of one partition, the old one ending as the new one starts, go
// to two statements), at most maxRunPartitions of them; an ask whose asker
// stopped waiting is dropped unsent.
func runBatcher(send func(group string, as []*runAsk)) *gather.Batcher[runAsk] {
	return &gather.Batcher[runAsk]{
		Take: func(pending []*runAsk) (batch, rest []*runAsk) {
			group := pending[0].o.Group
			parts := make(map[int]bool)
			for _, a := range pending {
				switch {
				case isClosed(a.gone):
					close(a.done) // nobody reads the answer
				case a.o.Group == group && !parts[a.o.Partition] && len(batch) < maxRunPartitions:
					parts[a.o.Partition] = true
					batch = append(batch, a)
				default:
					rest = append(rest, a)
				}
			}
			return batch, rest
		},
		Send: func(as []*runAsk) { send(as[0].o.Group, as) },
	}
}

// ask queues o's ask on b and waits for its answer or ctx's end.
func ask(ctx context.Context, b *gather.Batcher[runAsk], o partition.Ownership, rate []byte) (*runAsk, error) {
	a := &runAsk{o: o, rate: rate, done: make(chan struct{}), gone: ctx.Done()}
	b.Add(a)
	select {
	case <-a.done:
		return a, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runArgs returns the grants of as: partitions, tokens, owners.
func runArgs(as []*runAsk) (parts []int32, tokens []int64, owners []string) {
	for _, a := range as {
		parts = append(parts, int32(a.o.Partition))
		tokens = append(tokens, int64(a.o.Token))
		owners = append(owners, ownerOf(a.o))
	}
	return parts, tokens, owners
}

// sendOpen opens the runs of as, all of group, in one statement.
func (p *Processor) sendOpen(group string, as []*runAsk) {
	parts, tokens, owners := runArgs(as)
	byPart := make(map[int32]*runAsk, len(as))
	for i, a := range as {
		byPart[parts[i]] = a
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	rows, err := p.pool.Query(ctx, p.q.OpenRun, group, parts, tokens, owners)
	if err == nil {
		for rows.Next() {
			var part int32
			var prev *int64
			var open, recorded bool
			var rate []byte
			var since int64
			if err = rows.Scan(&part, &prev, &open, &recorded, &rate, &since); err != nil {
				break
			}
			if a := byPart[part]; a != nil {
				a.prev, a.open, a.recorded, a.rate, a.since = prev, open, recorded, rate, since
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

// sendClose closes the runs of as, all of group, in one statement.
func (p *Processor) sendClose(group string, as []*runAsk) {
	parts, tokens, _ := runArgs(as)
	rates := make([]*string, len(as))
	for i, a := range as {
		if a.rate != nil {
			r := string(a.rate)
			rates[i] = &r
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	_, err := p.pool.Exec(ctx, p.q.CloseRun, group, parts, tokens, rates)
	for _, a := range as {
		a.err = err
		close(a.done)
	}
}
