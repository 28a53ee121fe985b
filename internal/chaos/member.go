package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/netproxy"
	"github.com/leasehold/leasehold/lease"
)

// Member is one in-process worker of a Local fleet: the workload's Work
// with its own connection pool through a fault proxy, its own
// PausableClock, a Gate its handlers pass after writing their effect, and a
// history Recorder, whose commit outcomes it keeps.
type Member struct {
	// ID is the member id.
	ID string

	proxy *netproxy.Proxy
	pool  *pgxpool.Pool
	clock *PausableClock
	gate  *Gate
	rec   *Recorder

	cancel context.CancelFunc
	done   chan struct{}
	err    error // Work's, once done is closed

	mu       sync.Mutex
	crashed  bool
	outcomes map[int64]string // the latest commit outcome by job
	fenced   int
}

// Start starts a member called id.
func (l *Local) Start(ctx context.Context, id string) (_ *Member, err error) {
	pc, err := pgxpool.ParseConfig(l.st.url)
	if err != nil {
		return nil, fmt.Errorf("%w: DatabaseURL: %v", ErrInvalidConfig, err)
	}
	cc := pc.ConnConfig
	if strings.HasPrefix(cc.Host, "/") {
		return nil, fmt.Errorf("%w: members connect through a TCP fault proxy; the database URL names a Unix socket (%s): use a TCP host",
			ErrInvalidConfig, cc.Host)
	}
	m := &Member{ID: id, clock: NewPausableClock(), gate: NewGate(), done: make(chan struct{}), outcomes: map[int64]string{}}
	defer func() {
		if err != nil {
			m.release()
		}
	}()
	if m.proxy, err = netproxy.Start(net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))); err != nil {
		return nil, fmt.Errorf("chaos: fault proxy: %w", err)
	}
	if cc.TLSConfig != nil && cc.TLSConfig.ServerName == "" {
		cc.TLSConfig.ServerName = cc.Host
	}
	cc.Host, cc.Port, cc.Fallbacks = "127.0.0.1", uint16(m.proxy.Port()), nil
	cc.ConnectTimeout = 2 * time.Second
	pc.MaxConns = int32(min(l.cfg.Partitions+8, 40))
	if m.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("chaos: database: %w", err)
	}
	if m.rec, err = NewRecorder(filepath.Join(l.dir, id+".jsonl"), id); err != nil {
		return nil, err
	}
	m.rec.Tap(m.observe)
	env := WorkerEnv{
		Env: l.st.env, ID: id, Recorder: m.rec, Unfenced: l.cfg.Unfenced, Logger: l.cfg.Logger, Hold: m.hold,
		Stall: func() (bool, time.Duration) { return false, 0 },
		Lease: lease.Config{TTL: l.cfg.TTL, MaxBackoff: 250 * time.Millisecond, Clock: m.clock.Clock, Hooks: recordHooks(m.rec)},
	}
	wctx, cancel := context.WithCancel(ctx)
	m.cancel = cancel
	go func() {
		defer close(m.done)
		if err := l.st.wl.Work(wctx, m.pool, env); err != nil && !errors.Is(err, context.Canceled) {
			m.err = err
			l.cfg.Logger.Warn("chaos: member stopped", "member", id, "err", err)
		}
	}()
	l.mu.Lock()
	l.members = append(l.members, m)
	l.mu.Unlock()
	return m, nil
}

// hold is the member's Hold hook: the run's outcome is not known yet, and
// it passes the gate.
func (m *Member) hold(r HandlerRun) {
	if r.Job != 0 {
		m.mu.Lock()
		delete(m.outcomes, r.Job)
		m.mu.Unlock()
	}
	m.gate.Pass(r)
}

// observe keeps the outcomes of the member's commits.
func (m *Member) observe(e Event) {
	if e.Type != EventCommit {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Job != 0 {
		m.outcomes[e.Job] = e.Outcome
	}
	if e.Outcome == "fenced" {
		m.fenced++
	}
}

// Outcome returns the latest commit outcome of a job run by the member
// (queue.Outcome's names), if there is one.
func (m *Member) Outcome(job int64) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.outcomes[job]
	return o, ok
}

// Fenced counts the member's commits the fence refused.
func (m *Member) Fenced() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fenced
}

// Crash freezes the member for good, as a crashed process: its clock
// stops, its handlers hang, and its connections are cut and refused.
func (m *Member) Crash() {
	m.mu.Lock()
	m.crashed = true
	m.mu.Unlock()
	m.clock.Pause()
	m.gate.Close()
	m.proxy.Cut()
}

// HoldHandlers makes the member's handler runs wait at its gate, their
// effects written and their transactions open, until Release.
func (m *Member) HoldHandlers() { m.gate.Close() }

// Held returns the handler runs held since HoldHandlers.
func (m *Member) Held() []HandlerRun { return m.gate.Held() }

// Freeze stops the member's clock and holds its connections (the proxy
// keeps their bytes), as a paused process: from the inside it notices
// nothing.
func (m *Member) Freeze() {
	m.clock.Pause()
	m.proxy.Blackhole()
}

// Release heals the member's connections and lets its held handlers
// return, which then commit; it returns the runs that were held. Its clock
// stays stopped until ResumeClock.
func (m *Member) Release() []HandlerRun {
	m.proxy.Heal()
	return m.gate.Open()
}

// ResumeClock starts the member's clock again, caught up with real time,
// and returns how long it stood still.
func (m *Member) ResumeClock() time.Duration { return m.clock.Resume() }

// stop stops the member's Work within grace (a crashed member's gate is
// opened and its clock resumed first, its connections staying cut), then
// releases its resources.
func (m *Member) stop(ctx context.Context, grace time.Duration) error {
	m.mu.Lock()
	crashed := m.crashed
	m.mu.Unlock()
	if crashed {
		m.gate.Open()
		m.clock.Resume()
	}
	m.cancel()
	var err error
	select {
	case <-m.done:
		err = m.err
	case <-time.After(grace):
		err = fmt.Errorf("chaos: member %s did not stop within %v", m.ID, grace)
	case <-ctx.Done():
		err = ctx.Err()
	}
	m.release()
	return err
}

// release closes the member's pool (a pool whose connections are stuck is
// left to the process's exit after a while), proxy, clock and recorder.
func (m *Member) release() {
	m.gate.Open()
	if m.proxy != nil {
		m.proxy.Cut()
	}
	if m.pool != nil {
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			m.pool.Close()
		}()
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
		}
	}
	if m.proxy != nil {
		m.proxy.Close()
	}
	m.clock.Close()
	if m.rec != nil {
		m.rec.Close()
	}
}
