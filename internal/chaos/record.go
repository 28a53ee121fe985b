package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Event is one line of a worker process's history.
type Event struct {
	// At is the worker's wall-clock time (not skewed).
	At     time.Time `json:"at"`
	Worker string    `json:"worker"`
	// Type is grant, loss, release, commit, skew, relay, relay_kill or
	// relay_pause.
	Type string `json:"type"`
	// Lease is the lease name of grant, loss and release.
	Lease     string `json:"lease,omitempty"`
	Partition int    `json:"partition"`
	Token     int64  `json:"token,omitempty"`
	// Job and Outcome describe a commit attempt: the queue.Outcome of a
	// run whose handler returned (completed, fenced, ...), or, for the
	// Kafka workload, a batch commit counted by the consumer's Stats
	// (completed, fenced or failed; no job, partition or token). For a
	// relay event (kafka-out), Outcome is RelayPublished (with the
	// partition and the grant's token), RelayFenced or RelayFailed.
	Job     int64  `json:"job,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	// Skew is the worker's clock offset after a skew event.
	Skew time.Duration `json:"skew,omitempty"`
	Err  string        `json:"err,omitempty"`
}

// The event types.
const (
	EventGrant   = "grant"
	EventLoss    = "loss"
	EventRelease = "release"
	EventCommit  = "commit"
	EventSkew    = "skew"
	// EventRelay is a publish of a kafka-out relay: a Kafka transaction
	// committed, or a publish refused or failed (Outcome).
	EventRelay = "relay"
	// EventRelayKill is recorded by a kafka-out worker just before it
	// kills itself (SIGKILL), right after a relay's Kafka commit.
	EventRelayKill = "relay_kill"
	// EventRelayPause is recorded by a kafka-out worker just before it
	// stops itself (SIGSTOP) in a relay's Kafka transaction.
	EventRelayPause = "relay_pause"
)

// The outcomes of an EventRelay.
const (
	RelayPublished = "published"
	RelayFenced    = "fenced"
	RelayFailed    = "failed"
)

// Recorder appends events to a JSON-lines file, one write per event, so a
// process killed with SIGKILL loses at most the event it was writing (the
// reader skips a torn last line).
type Recorder struct {
	mu     sync.Mutex
	f      *os.File
	worker string
	err    error
	tap    func(Event)
}

// NewRecorder opens (creating or appending to) the history file path.
func NewRecorder(path, worker string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: history: %w", err)
	}
	return &Recorder{f: f, worker: worker}, nil
}

// Tap makes the recorder pass every event it records to f as well (an
// in-process Member watching its own history). Call it before recording.
func (r *Recorder) Tap(f func(Event)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tap = f
}

// Record appends e, stamped with the time and the worker. The first write
// error is kept and returned by Close.
func (r *Recorder) Record(e Event) {
	e.At, e.Worker = time.Now(), r.worker
	b, err := json.Marshal(e)
	if err != nil {
		return // an Event always marshals
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tap != nil {
		r.tap(e)
	}
	if r.err != nil {
		return
	}
	if _, err := r.f.Write(append(b, '\n')); err != nil {
		r.err = fmt.Errorf("chaos: history: %w", err)
	}
}

// Close closes the file and returns the first error.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.err, r.f.Close())
}

// ReadEvents reads every *.jsonl history in dir, in time order. Lines that do
// not parse (a line torn by kill -9) are skipped and counted.
func ReadEvents(dir string) (events []Event, torn int, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, 0, fmt.Errorf("chaos: history: %w", err)
		}
		es, t, err := readEvents(f)
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("chaos: history %s: %w", p, err)
		}
		events, torn = append(events, es...), torn+t
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].At.Before(events[j].At) })
	return events, torn, nil
}

func readEvents(r io.Reader) ([]Event, int, error) {
	var out []Event
	torn := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			torn++
			continue
		}
		out = append(out, e)
	}
	return out, torn, sc.Err()
}
