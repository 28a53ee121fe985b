package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// The runs of a Processor's grants are opened (queueOpenRun) and closed
// (queueCloseRun) by one statement per group for the grants that start, or
// end, together (see batcher), instead of one per grant: one per grant
// was the largest cost of 64 workers starting together (1,063 open
// statements, 6.8 s of the server's time, queued on each worker's pool).

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
	err      error
	done     chan struct{}
	gone     <-chan struct{} // the asker stopped waiting (its ctx ended)
}

// runBatcher returns the batcher of the open or close statements.
func (p *Processor) runBatcher(send func(group string, as []*runAsk)) *batcher[runAsk] {
	return &batcher[runAsk]{
		max:  maxRunPartitions,
		of:   func(a *runAsk) (string, int, <-chan struct{}) { return a.o.Group, a.o.Partition, a.gone },
		send: send,
		drop: func(a *runAsk) { close(a.done) },
	}
}

// ask queues o's ask on b and waits for its answer or ctx's end.
func ask(ctx context.Context, b *batcher[runAsk], o partition.Ownership) (*runAsk, error) {
	a := &runAsk{o: o, done: make(chan struct{}), gone: ctx.Done()}
	b.add(a)
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

// sendClose closes the runs of as, all of group, in one statement.
func (p *Processor) sendClose(group string, as []*runAsk) {
	parts, tokens, _ := runArgs(as)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	_, err := p.pool.Exec(ctx, p.q.CloseRun, group, parts, tokens)
	for _, a := range as {
		a.err = err
		close(a.done)
	}
}
