package queue

import (
	"context"
	"sync"
	"time"
)

// The fetcher reads the due jobs of all the member's partitions that ask
// for them, in one statement per group (queueFetch), instead of one per
// partition. A partition's pipeline asks and waits for its answer; the
// asks that come while a statement runs are read together by the next one.
// So a member whose partitions are woken together (a poll that found due
// jobs in many of them, a burst of enqueues, a start) fetches with a few
// statements.
//
// Under a steady trickle, wakes come one at a time, each for a job or two:
// a statement per wake would cost a statement per job. So after a fetch
// that found its partitions caught up (no ask filled), the next statement
// waits until FetchCooldown has passed since it, and reads every ask that
// came meanwhile; after a fetch that filled an ask (a backlog), the next
// one runs at once, and so does a fetch after a quiet spell.
//
// One goroutine runs while asks wait, and returns when none does: an idle
// member has no fetcher goroutine.

// maxFetchPartitions bounds the partitions one fetch statement reads: the
// rest wait for the next one.
const maxFetchPartitions = 64

// fetchTimeout bounds one fetch statement; a pipeline that stops waiting
// for its answer earlier (its grant ended) just drops it.
const fetchTimeout = 30 * time.Second

// fetchAsk is one partition's ask: up to n due jobs, leaving out the held
// ids and the skipped keys.
type fetchAsk struct {
	group string
	part  int
	n     int
	held  []int64
	skip  []string
}

// asked is an ask waiting for its answer.
type asked struct {
	fetchAsk
	res  fetchResult
	err  error
	done chan struct{}   // closed once res and err are set
	gone <-chan struct{} // closed when the asker stopped waiting (its ctx ended)
}

type fetcher struct {
	p *Processor

	mu      sync.Mutex
	asks    []*asked
	running bool // the loop's goroutine runs
	// calm is when the next statement may run after a fetch that found
	// its partitions caught up (zero: at once).
	calm time.Time
}

// fetch asks for a's jobs and waits for them, or for ctx's end.
func (fr *fetcher) fetch(ctx context.Context, a fetchAsk) (fetchResult, error) {
	w := &asked{fetchAsk: a, done: make(chan struct{}), gone: ctx.Done()}
	fr.mu.Lock()
	fr.asks = append(fr.asks, w)
	if !fr.running {
		fr.running = true
		go fr.loop()
	}
	fr.mu.Unlock()
	select {
	case <-w.done:
		return w.res, w.err
	case <-ctx.Done():
		return fetchResult{}, ctx.Err()
	}
}

// loop reads the asks, a statement per group and at most
// maxFetchPartitions at a time, until none is left.
func (fr *fetcher) loop() {
	for {
		fr.mu.Lock()
		if len(fr.asks) == 0 {
			fr.running = false
			fr.mu.Unlock()
			return
		}
		if wait := time.Until(fr.calm); wait > 0 {
			fr.mu.Unlock()
			time.Sleep(wait) // more asks join this statement meanwhile
			fr.mu.Lock()
		}
		group := fr.asks[0].group
		var take []*asked
		rest := fr.asks[:0]
		for _, a := range fr.asks {
			if isClosed(a.gone) {
				// Its grant ended while it waited (a handoff, a stop):
				// nobody reads the answer, so no statement reads it.
				close(a.done)
				continue
			}
			if a.group == group && len(take) < maxFetchPartitions && !asking(take, a.part) {
				take = append(take, a)
			} else {
				rest = append(rest, a)
			}
		}
		fr.asks = rest
		fr.mu.Unlock()
		if len(take) > 0 {
			fr.read(group, take)
		}
	}
}

// isClosed reports whether c is closed (a nil c never is).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// asking reports whether as has an ask of partition part (two grants of
// one partition, the old one ending as the new one starts, are read by
// two statements: each partition's rows go to one ask).
func asking(as []*asked, part int) bool {
	for _, a := range as {
		if a.part == part {
			return true
		}
	}
	return false
}

// read runs one statement for the asks as, all of group, and answers them.
func (fr *fetcher) read(group string, as []*asked) {
	p := fr.p
	var args fetchArgs
	byPart := make(map[int]*asked, len(as))
	for _, a := range as {
		args.add(a.fetchAsk)
		byPart[a.part] = a
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	err := p.readFetch(ctx, p.q.Fetch, []any{group, args.parts, args.n, args.held, args.heldIn, args.skip, args.skipIn, []string{}},
		nil, func(part int) *fetchResult {
			if a := byPart[part]; a != nil {
				return &a.res
			}
			return nil
		})
	caughtUp := true
	if err == nil {
		p.fetched.Add(int64(len(as)))
	}
	for _, a := range as {
		if err != nil {
			a.res, a.err = fetchResult{}, err
		}
		caughtUp = caughtUp && a.res.scanned < a.n
		close(a.done)
	}
	fr.mu.Lock()
	fr.calm = time.Time{}
	if caughtUp && err == nil {
		fr.calm = time.Now().Add(p.cfg.FetchCooldown)
	}
	fr.mu.Unlock()
}
