package queue

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/backoff"
	"github.com/leasehold/leasehold/internal/store"
)

// NotifyChannel returns the LISTEN/NOTIFY channel on which enqueues in
// schema ("" for the default) announce due jobs: "leasehold_jobs_" and 16
// hex digits of XXH64 of the schema name. The payload is
// "<partition>:<group>"; "pause:<group>" when a pause or resume of the
// group changed (see Client.Pause); and, from Client.Cancel,
// "cancel:<partition>:<id>,<id>,...:<group>" for the jobs it cancels (one
// per partition and at most store.CancelNotifyChunk ids), so that the
// jobs' owner cancels their handlers if it runs them.
func NotifyChannel(schema string) string { return store.QueueChannel(schema) }

// wakeKey names one partition of one group.
type wakeKey struct {
	group     string
	partition int
}

// subscribe registers a Run's wake channel.
func (p *Processor) subscribe(group string, part int) chan struct{} {
	c := make(chan struct{}, 1)
	k := wakeKey{group, part}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.wakes[k]) == 0 {
		p.unretained = true
		p.nextDue = time.Now() // the member polls soon (see member.go): to learn when its jobs come due
		signal(p.dueC)
	}
	p.wakes[k] = append(p.wakes[k], c)
	return c
}

func (p *Processor) unsubscribe(group string, part int, c chan struct{}) {
	k := wakeKey{group, part}
	p.mu.Lock()
	defer p.mu.Unlock()
	cs := p.wakes[k]
	for i := range cs {
		if cs[i] == c {
			cs = append(cs[:i], cs[i+1:]...)
			break
		}
	}
	if len(cs) == 0 {
		delete(p.wakes, k)
	} else {
		p.wakes[k] = cs
	}
}

// wake wakes the Runs of one partition, or of all (all true).
func (p *Processor) wake(k wakeKey, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	signal := func(cs []chan struct{}) {
		for _, c := range cs {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	if !all {
		signal(p.wakes[k])
		return
	}
	for _, cs := range p.wakes {
		signal(cs)
	}
}

// Listen wakes this Processor's partitions as soon as jobs due now are
// enqueued for them, until ctx is done; it then returns ctx's error. Run it
// in its own goroutine beside the Member. It listens on one connection of
// the pool, shared with the pool's other listeners in this process (the
// partition members of its schema: see docs/worker.md), reconnecting with
// backoff after a failure; after a reconnect it wakes every partition,
// since notifications may have been missed. Without it, the member finds
// due jobs every PollInterval. It also cancels the handlers of running
// jobs that Client.Cancel cancelled (without it, the publisher does within
// about PublishInterval; see docs/running.md).
func (p *Processor) Listen(ctx context.Context) error {
	b := backoff.New(100*time.Millisecond, 5*time.Second, p.cfg.Rand)
	unsubscribe := store.Listen(p.listen, p.schema, &store.Subscriber{
		Channel: p.q.Channel,
		Notify:  p.notified,
		Connected: func() {
			p.wake(wakeKey{}, true)
			p.pauses.wake() // a pause or resume may have been missed too
			p.fails.Recovered("listen", "queue: listening for enqueued jobs again")
		},
		Failed: func(err error, attempt int) {
			if attempt >= 3 {
				p.fails.Fail("listen", "queue: cannot listen for enqueued jobs; relying on polling", "err", err, "attempt", attempt)
			}
		},
		Delay: b.Delay,
	})
	<-ctx.Done()
	unsubscribe()
	return ctx.Err()
}

// notified takes in one notification of the queue's channel.
func (p *Processor) notified(payload string) {
	if rest, ok := strings.CutPrefix(payload, "cancel:"); ok {
		p.cancelNotified(rest)
		return
	}
	part, group, ok := strings.Cut(payload, ":")
	if ok && part == "pause" {
		p.pauses.wake()
		return
	}
	if i, err := strconv.Atoi(part); ok && err == nil {
		p.wake(wakeKey{group, i}, false)
	}
}

// cancelNotified takes in a cancel notification
// ("<partition>:<id>,<id>,...:<group>", see store's queueCancel): the jobs'
// handlers this Processor runs are cancelled, and the jobs it holds but has
// not started are dropped before they start.
func (p *Processor) cancelNotified(payload string) {
	part, rest, ok := strings.Cut(payload, ":")
	list, group, ok2 := strings.Cut(rest, ":")
	n, err := strconv.Atoi(part)
	if !ok || !ok2 || err != nil {
		return // not ours to parse: ignored, as unknown payloads are
	}
	ids := make([]int64, 0, strings.Count(list, ",")+1)
	for s := range strings.SplitSeq(list, ",") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return
		}
		ids = append(ids, i)
	}
	p.cancelJobs(wakeKey{group, n}, ids)
}
