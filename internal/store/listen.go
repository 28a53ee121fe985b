package store

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Every listening session costs the server on every notification of its
// database, whatever the channel: PostgreSQL signals all the listening
// backends of a database at each commit that notifies, and each one wakes
// and reads the notification queue. A worker used to listen on two
// connections (its partition member's and its queue's), so that each
// enqueue's notification woke two backends per worker, the member's for
// nothing. Listen shares one connection per pool and schema instead,
// LISTENing on all the schema's channels, for every subscriber of the
// process.

// Subscriber is one component's interest in a schema's notifications (see
// Listen). Its functions are called on the listener's goroutine: they
// must not block.
type Subscriber struct {
	// Channel is the channel whose notifications go to Notify: the
	// schema's QueueChannel or PartitionChannel.
	Channel string
	// Notify takes one notification's payload.
	Notify func(payload string)
	// Connected is called once the connection listens, after every
	// (re)connect, and at once for a subscriber that joins a connection
	// that listens already: notifications may have been missed before.
	Connected func()
	// Failed is called when connecting or listening failed; attempt counts
	// the failures since the connection last listened, from 1. Optional.
	Failed func(err error, attempt int)
	// Delay is the backoff before reconnect attempt n (0-based) of a
	// listener this subscriber starts: its component's backoff.Backoff's
	// Delay. Nil: a second.
	Delay func(attempt int) time.Duration
}

// Session is where the listening session of a DB connects (leasehold.DB's
// Listen).
type Session struct {
	// Pool is the DB's pool: the listening connection is taken from it
	// (its connect hooks apply) and kept out of it while it listens, unless
	// Direct is set.
	Pool *pgxpool.Pool
	// Direct is the configuration of a connection straight to the server
	// (leasehold.Config.ListenURL), for a Pool behind a transaction pooler.
	Direct *pgx.ConnConfig
	// Off: no session at all (a transaction pooler and no Direct): Listen
	// subscribes nobody, and its subscribers poll.
	Off bool
}

// Listen subscribes s to the notifications of schema's channels, received
// on one session shared by all the subscribers of that session and schema
// (see Session), reconnecting with backoff after a failure. The returned
// function unsubscribes s; the last subscriber's closes the connection and
// returns once its goroutine has. When src is Off, Listen does nothing (s
// is never Connected) and unsubscribe returns at once.
func Listen(src Session, schema string, s *Subscriber) (unsubscribe func()) {
	if src.Off {
		return func() {}
	}
	k := listenKey{src.Pool, src.Direct, schema}
	listeners.mu.Lock()
	l := listeners.m[k]
	if l == nil {
		l = newListener(k, s.Delay)
		if listeners.m == nil {
			listeners.m = make(map[listenKey]*listener)
		}
		listeners.m[k] = l
	}
	l.mu.Lock()
	l.subs = append(slices.Clip(l.subs), s) // copied on write: readers keep theirs
	connected := l.connected
	l.mu.Unlock()
	listeners.mu.Unlock()
	if connected {
		s.Connected()
	}
	return sync.OnceFunc(func() { l.unsubscribe(s) })
}

type listenKey struct {
	pool   *pgxpool.Pool
	direct *pgx.ConnConfig // nil: a connection of pool
	schema string
}

// listeners are the listeners running, by pool and schema.
var listeners struct {
	mu sync.Mutex
	m  map[listenKey]*listener
}

type listener struct {
	key    listenKey
	delay  func(attempt int) time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	subs      []*Subscriber
	connected bool // the connection listens
}

func newListener(k listenKey, delay func(int) time.Duration) *listener {
	if delay == nil {
		delay = func(int) time.Duration { return time.Second }
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{key: k, delay: delay, cancel: cancel, done: make(chan struct{})}
	go l.run(ctx)
	return l
}

// unsubscribe removes s; the last subscriber stops the listener and waits
// for its goroutine.
func (l *listener) unsubscribe(s *Subscriber) {
	listeners.mu.Lock()
	l.mu.Lock()
	l.subs = slices.DeleteFunc(slices.Clone(l.subs), func(x *Subscriber) bool { return x == s })
	last := len(l.subs) == 0
	l.mu.Unlock()
	if last {
		delete(listeners.m, l.key)
	}
	listeners.mu.Unlock()
	if last {
		l.cancel()
		<-l.done
	}
}

// subscribers returns the subscribers now (never modified: see Listen).
func (l *listener) subscribers() []*Subscriber {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.subs
}

// setConnected records whether the connection listens, and returns the
// subscribers then.
func (l *listener) setConnected(c bool) []*Subscriber {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.connected = c
	return l.subs
}

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	failures := 0
	for {
		listened, err := l.listen(ctx)
		l.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		if listened {
			failures = 0
		}
		failures++
		for _, s := range l.subscribers() {
			if s.Failed != nil {
				s.Failed(err, failures)
			}
		}
		t := time.NewTimer(l.delay(failures - 1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listen listens on one connection until it fails; listened reports whether
// LISTEN succeeded.
func (l *listener) listen(ctx context.Context) (listened bool, err error) {
	conn, err := l.connect(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	sql := "LISTEN " + pgx.Identifier{QueueChannel(l.key.schema)}.Sanitize() +
		"; LISTEN " + pgx.Identifier{PartitionChannel(l.key.schema)}.Sanitize()
	if _, err := conn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		return false, err
	}
	for _, s := range l.setConnected(true) {
		s.Connected()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		for _, s := range l.subscribers() {
			if s.Channel == n.Channel {
				s.Notify(n.Payload)
			}
		}
	}
}

// connect opens the listening connection: a connection of the pool, kept
// out of it while it listens, or the direct one.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	if l.key.direct != nil {
		return pgx.ConnectConfig(ctx, l.key.direct)
	}
	pc, err := l.key.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pc.Hijack(), nil
}
