package queue

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier coalesces the notifications of a Client's own enqueues (Enqueue
// and EnqueueMany, which commit when their statement returns). A NOTIFY
// takes a database-wide lock at commit, so one per enqueue would serialise
// enqueuing transactions. Instead, an enqueue whose groups were all
// notified less than window ago sends none in its statement; once it has
// committed, its partitions are notified at the end of the window by one
// statement of the notifier's, covering every partition pending by then. So
// an idle owner is woken at most window after any committed enqueue, and a
// steady stream of enqueues costs at most one notifying statement per
// window, however many partitions it spreads over. (Coalescing by
// partition instead let keyless jobs, placed round robin, notify in nearly
// every enqueue of a group of many partitions.)
type notifier struct {
	pool    *pgxpool.Pool
	channel string
	window  time.Duration

	mu      sync.Mutex
	last    map[string]time.Time // when each group was last notified
	pending map[wakeKey]bool     // committed enqueues not yet notified
	armed   bool                 // a flush is scheduled
}

func newNotifier(pool *pgxpool.Pool, channel string, window time.Duration) *notifier {
	return &notifier{pool: pool, channel: channel, window: window,
		last: make(map[string]time.Time), pending: make(map[wakeKey]bool)}
}

// inStatement reports whether an enqueue to the due partitions keys must
// notify in its own statement: when the group of one of them was not
// notified within the window. It then counts their groups as notified now.
func (n *notifier) inStatement(keys []wakeKey) bool {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	stale := false
	for _, k := range keys {
		if now.Sub(n.last[k.group]) >= n.window {
			stale = true
			break
		}
	}
	if stale {
		for _, k := range keys {
			n.last[k.group] = now
		}
		if len(n.last) > 100_000 { // bound the memory of a long-lived client
			clear(n.last)
		}
	}
	return stale
}

// committed schedules the notification of keys, whose enqueue committed
// without notifying.
func (n *notifier) committed(keys []wakeKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		n.pending[k] = true
	}
	if !n.armed && len(n.pending) > 0 {
		n.armed = true
		time.AfterFunc(n.window, n.flush)
	}
}

// flush notifies the pending partitions in one statement. A failure is
// not reported: the owners find the jobs at their next poll.
func (n *notifier) flush() {
	n.mu.Lock()
	payloads := make([]string, 0, len(n.pending))
	now := time.Now()
	for k := range n.pending {
		payloads = append(payloads, strconv.Itoa(k.partition)+":"+k.group)
		n.last[k.group] = now
	}
	clear(n.pending)
	n.armed = false
	n.mu.Unlock()
	if len(payloads) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, n.channel, payloads)
}
