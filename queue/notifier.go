package queue

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// notifier coalesces the notifications of a Client's own enqueues (Enqueue
// and EnqueueMany, which commit when their statement returns). A NOTIFY
// takes a database-wide lock at commit and wakes every listening backend of
// the database, so one per enqueue would serialise enqueuing transactions
// and wake each worker's listener per job. Instead, an enqueue whose groups
// were all notified less than window ago sends none in its statement; its
// partitions are pending, and the next enqueue that notifies in its
// statement (the first one a window after the last) carries them: a steady
// stream of enqueues notifies once per window, in statements it runs
// anyway, however many partitions it spreads over. When the stream stops,
// a partition pending for flushAfter windows is notified by one statement
// of the notifier's, for every partition pending by then. So an idle owner
// is woken at most about window after a committed enqueue while enqueues
// go on, and 1.5 windows after the last one. (Coalescing by partition
// instead let keyless jobs, placed round robin, notify in nearly every
// enqueue of a group of many partitions; a flush of its own every window
// cost a transaction per window.)
type notifier struct {
	pool    *pgxpool.Pool
	channel string
	stmt    string // store's QueueSQL.Notify
	window  time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	last    map[string]time.Time // when each group was last notified
	pending map[wakeKey]bool     // committed enqueues not yet notified
	oldest  time.Time            // when the oldest pending one was added
	armed   bool                 // a flush is scheduled
}

// flushAfter is how many windows a partition is left pending, for an
// enqueue to carry, before the notifier's own statement notifies it.
const flushAfter = 1.5

func newNotifier(pool *pgxpool.Pool, channel, stmt string, window time.Duration, log *slog.Logger) *notifier {
	return &notifier{pool: pool, channel: channel, stmt: stmt, window: window, log: log,
		last: make(map[string]time.Time), pending: make(map[wakeKey]bool)}
}

// inStatement reports whether an enqueue to the due partitions keys must
// notify in its own statement: when the group of one of them was not
// notified within the window. It then counts their groups as notified now
// and returns the pending partitions the statement must notify too
// (payloads "<partition>:<group>", and their keys for carryFailed).
func (n *notifier) inStatement(keys []wakeKey) (notify bool, carry []string, carried []wakeKey) {
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
	if !stale {
		return false, nil, nil
	}
	for _, k := range keys {
		n.last[k.group] = now
	}
	for k := range n.pending {
		carry = append(carry, payload(k))
		carried = append(carried, k)
		n.last[k.group] = now
	}
	clear(n.pending)
	if len(n.last) > 100_000 { // bound the memory of a long-lived client
		clear(n.last)
	}
	return true, carry, carried
}

// payload is the notification payload of partition k.
func payload(k wakeKey) string { return strconv.Itoa(k.partition) + ":" + k.group }

// committed marks keys pending: their enqueue committed without notifying,
// or the statement that was to carry them failed.
func (n *notifier) committed(keys []wakeKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		n.oldest = time.Now()
	}
	for _, k := range keys {
		n.pending[k] = true
	}
	n.arm()
}

// arm schedules a flush for when the oldest pending partition has waited
// flushAfter windows, unless one is scheduled. Called with mu held.
func (n *notifier) arm() {
	if n.armed || len(n.pending) == 0 {
		return
	}
	n.armed = true
	time.AfterFunc(time.Until(n.oldest.Add(time.Duration(flushAfter*float64(n.window)))), n.flush)
}

// flush notifies the pending partitions in one statement, if the oldest
// has waited flushAfter windows (an enqueue carried the older ones: it
// waits for the rest). A failure is logged: the jobs are committed, and
// their owners find them at their next poll.
func (n *notifier) flush() {
	n.mu.Lock()
	n.armed = false
	if time.Since(n.oldest) < time.Duration(flushAfter*float64(n.window)) {
		n.arm()
		n.mu.Unlock()
		return
	}
	payloads := make([]string, 0, len(n.pending))
	now := time.Now()
	for k := range n.pending {
		payloads = append(payloads, payload(k))
		n.last[k.group] = now
	}
	clear(n.pending)
	n.mu.Unlock()
	if len(payloads) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(ctx, n.stmt, n.channel, payloads); err != nil {
		// The jobs are committed: their owners find them at their next
		// poll (PollInterval), not at once.
		n.log.Warn("queue: could not notify the owners of enqueued jobs; they find them at their next poll",
			"partitions", len(payloads), "err", err)
	}
}
