package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/netproxy"
)

// slot is one worker position: its fault proxy survives the worker
// processes started in it (one incarnation after each kill).
type slot struct {
	index    int
	proxy    *netproxy.Proxy
	url      string // the database URL through the proxy
	skewFile string
	// pauseFile is where the worker asks to be resumed after it stopped
	// itself (a relay pause, kafka-out).
	pauseFile string

	incarnation int
	id          string
	proc        *os.Process
	exited      chan struct{}
	exitErr     error
	// down is why the worker does not count as live: a fault kind, or "".
	down Kind
}

// fleet is the worker processes and their proxies.
type fleet struct {
	cfg   Config
	env   Env
	dir   string
	mu    sync.Mutex
	slots []*slot
	// unexpected counts worker processes that exited without being killed
	// or stopped.
	unexpected int
	stopping   bool
	// relayKills, if set (Config.RelayKill), receives each worker process
	// that died of a SIGKILL the orchestrator did not send: a kafka-out
	// worker that killed itself right after a relay's Kafka commit. Such
	// an exit is not unexpected.
	relayKills chan relayKill
	// startMu serialises the starts of workers in slots, so that a slot
	// whose worker exited is started again once.
	startMu sync.Mutex
}

// relayKill is a worker process that killed itself: its slot, its member
// id, its exited channel and the time its exit was seen.
type relayKill struct {
	slot   *slot
	id     string
	exited chan struct{}
	at     time.Time
}

// start starts the worker process of s, as a new incarnation.
func (f *fleet) start(s *slot) error {
	f.mu.Lock()
	s.incarnation++
	id := fmt.Sprintf("w%d.%d", s.index, s.incarnation)
	f.mu.Unlock()
	wc := WorkerConfig{ID: id, DatabaseURL: s.url, Workload: f.cfg.Workload, Env: f.env, TTL: f.cfg.TTL,
		Seed: f.cfg.Seed, StallProbability: f.cfg.StallProbability, Unfenced: f.cfg.Unfenced, RelayKill: f.cfg.RelayKill,
		RelayPause: f.cfg.RelayPause, PauseFile: s.pauseFile,
		TransactionPooling: f.cfg.PgBouncer, History: filepath.Join(f.dir, id+".jsonl"), SkewFile: s.skewFile}
	cmd := f.cfg.Command(wc.Args()...)
	logf, err := os.Create(filepath.Join(f.dir, id+".log"))
	if err != nil {
		return fmt.Errorf("chaos: worker log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL // never outlive the orchestrator
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start worker %s: %w", id, err)
	}
	exited := make(chan struct{})
	f.mu.Lock()
	s.id, s.proc, s.exited, s.exitErr = id, cmd.Process, exited, nil
	f.mu.Unlock()
	go func() {
		err := cmd.Wait()
		at := time.Now()
		f.mu.Lock()
		s.exitErr = err
		self := false
		if s.down != Kill && !f.stopping {
			if self = f.relayKills != nil && diedOfSIGKILL(err); !self {
				f.unexpected++
			}
		}
		f.mu.Unlock()
		close(exited)
		if self {
			select {
			case f.relayKills <- relayKill{slot: s, id: id, exited: exited, at: at}:
			default: // restartExited starts it again
			}
		}
	}()
	return nil
}

// diedOfSIGKILL reports whether a worker's Wait error says it was killed
// by SIGKILL.
func diedOfSIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// restartIfExited starts the worker of s again if the incarnation whose
// exited channel is exited is still s's, has exited, and is not being
// killed by a fault (which starts it again itself). It reports whether it
// started one.
func (f *fleet) restartIfExited(s *slot, exited chan struct{}) (bool, error) {
	f.startMu.Lock()
	defer f.startMu.Unlock()
	f.mu.Lock()
	current, down, stopping := s.exited == exited, s.down, f.stopping
	f.mu.Unlock()
	if !current || down == Kill || stopping {
		return false, nil
	}
	select {
	case <-exited:
	default:
		return false, nil
	}
	return true, f.start(s)
}

// live returns the member ids of the workers that count as live: running,
// not paused and not cut off.
func (f *fleet) live() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for _, s := range f.slots {
		if s.down != "" || s.exited == nil {
			continue
		}
		select {
		case <-s.exited:
		default:
			out[s.id] = true
		}
	}
	return out
}

// swapDown sets s.down to to if it is from, and reports whether it was.
func (f *fleet) swapDown(s *slot, from, to Kind) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.down != from {
		return false
	}
	s.down = to
	return true
}

func (f *fleet) setDown(s *slot, k Kind) {
	f.mu.Lock()
	s.down = k
	f.mu.Unlock()
}

func (f *fleet) signal(s *slot, sig syscall.Signal) error {
	f.mu.Lock()
	p := s.proc
	f.mu.Unlock()
	if p == nil {
		return fmt.Errorf("chaos: worker %d has no process", s.index)
	}
	return p.Signal(sig)
}

// restartExited starts again the workers that exited on their own (an
// error at start, a crash), and returns their ids.
func (f *fleet) restartExited() []string {
	type dead struct {
		s      *slot
		id     string
		err    error
		exited chan struct{}
	}
	var deads []dead
	f.mu.Lock()
	for _, s := range f.slots {
		if s.exited == nil || s.down == Kill || f.stopping {
			continue
		}
		select {
		case <-s.exited:
			deads = append(deads, dead{s, s.id, s.exitErr, s.exited})
		default:
		}
	}
	f.mu.Unlock()
	var ids []string
	for _, d := range deads {
		started, err := f.restartIfExited(d.s, d.exited)
		if started {
			ids = append(ids, fmt.Sprintf("%s (%v)", d.id, d.err))
		}
		if err != nil {
			ids = append(ids, err.Error())
		}
	}
	return ids
}

// healAll undoes every fault on every worker.
func (f *fleet) healAll() {
	for _, s := range f.slots {
		s.proxy.Heal()
		s.proxy.SetLatency(0)
		_ = writeSkew(s.skewFile, 0)
		_ = f.signal(s, syscall.SIGCONT)
		f.setDown(s, "")
	}
}

// stop stops every worker: SIGTERM, then SIGKILL after grace.
func (f *fleet) stop(grace time.Duration) {
	f.mu.Lock()
	f.stopping = true
	slots := append([]*slot(nil), f.slots...)
	f.mu.Unlock()
	for _, s := range slots {
		_ = f.signal(s, syscall.SIGCONT)
		_ = f.signal(s, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, s := range slots {
		if s.exited == nil {
			continue
		}
		select {
		case <-s.exited:
		case <-deadline:
			_ = f.signal(s, syscall.SIGKILL)
			<-s.exited
		}
	}
	for _, s := range slots {
		s.proxy.Close()
	}
}

// logTail returns the end of a worker's log.
func (f *fleet) logTail(id string) string {
	b, _ := os.ReadFile(filepath.Join(f.dir, id+".log"))
	s := strings.TrimSpace(string(b))
	if len(s) > 1500 {
		s = s[len(s)-1500:]
	}
	return s
}

// waitExit waits for s's process to exit, bounded by ctx.
func waitExit(ctx context.Context, s *slot) error {
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
