package demo

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/chaos"
)

// The story's settings.
const (
	// Schema is the schema the demo works in (dropped at the start and the
	// end on a server it is given).
	Schema = "leasehold_demo"
	// Group is the demo's partition group.
	Group = "demo"
	// Partitions is the queue story's partition count.
	Partitions = 12
	// Jobs is the number of jobs the queue story feeds.
	Jobs = 3000
	// Keys is the number of job keys the jobs are spread over.
	Keys = 200
	// Produce is how long the feeding of the jobs is spread over.
	Produce = 8 * time.Second
	// TTL is the lease TTL.
	TTL = 2 * time.Second
	// KafkaPartitions is the Kafka story's topic partition count.
	KafkaPartitions = 8
	// KafkaRecords is the number of records of each of the Kafka story's
	// two waves.
	KafkaRecords = 1000
)

// Config configures Run.
type Config struct {
	// DatabaseURL names the server to use. Empty starts a throwaway
	// cluster.
	DatabaseURL string
	// Kafka tells the Kafka story instead of the queue story.
	Kafka bool
	// Unfenced is the control: the members apply their effects outside the
	// fenced transaction, and the report must find violations.
	Unfenced bool
	// Events receives the story. Nil discards it. It is called from one
	// goroutine at a time.
	Events func(Event)
	// Logger receives the log records of leasehold's components. Nil
	// discards them.
	Logger *slog.Logger
	// UIAddr, if set, is the host:port on which the web UI (package ui)
	// serves the demo's database while the story runs, and until Hold
	// returns: Run tells its URL as a Step, and in Report.UI. An address
	// in use is an error wrapping uiserve.ErrAddrInUse. Defaults to none.
	UIAddr string
	// UIActions offers the UI's actions (retry, cancel, pause, resume,
	// cancel a batch). A job cancelled mid-story is then reported by the
	// checker. Defaults to false: the UI is read-only.
	UIActions bool
	// Hold, if set, is called with the report once the story is told and
	// checked, before the demo's schema is dropped, and Run returns when it
	// does: with UIAddr, the UI serves the final state meanwhile. Defaults
	// to none.
	Hold func(ctx context.Context, rep Report)
}

// EventKind says what an Event is.
type EventKind int

// The kinds of Event.
const (
	// Step is a step of the story: a caller stamps it with the time.
	Step EventKind = iota
	// Detail continues the step before it.
	Detail
	// Progress reports Done of Items produced finished, of Total planned.
	Progress
)

// Event is one thing the story tells.
type Event struct {
	Kind EventKind
	// Text is the line of a Step or a Detail.
	Text string
	// Done, Items and Total are a Progress event's counts.
	Done, Items, Total int
}

// story is the state of one run.
type story struct {
	cfg   Config
	l     *chaos.Local
	names []string
	total int // items planned
	rep   Report
	tell  func(context.Context) error // the queue or the Kafka story

	mu    sync.Mutex // serialises the events
	shown string     // the ownership row shown last
}

// Run tells the story and returns its report, whose Violations list the
// invariants that failed. An error means the story could not be told.
func Run(ctx context.Context, cfg Config) (Report, error) {
	start := time.Now()
	if cfg.Events == nil {
		cfg.Events = func(Event) {}
	}
	s := &story{cfg: cfg, names: []string{"worker-1", "worker-2", "worker-3"}}
	lc := chaos.LocalConfig{DatabaseURL: cfg.DatabaseURL, Schema: Schema, Group: Group, Workload: "queue", NoPlain: true,
		Partitions: Partitions, Keys: Keys, TTL: TTL, Unfenced: cfg.Unfenced, Say: s.step, Logger: cfg.Logger}
	s.rep.Story, s.total, s.tell = "queue", Jobs, s.queue
	if cfg.Kafka {
		lc.Workload, lc.Partitions = "kafka", KafkaPartitions
		s.rep.Story, s.total, s.tell = "kafka", 2*KafkaRecords, s.kafka
	}
	l, err := chaos.OpenLocal(ctx, lc)
	if err != nil {
		return Report{}, err
	}
	defer func() {
		if err := l.Close(context.WithoutCancel(ctx)); err != nil {
			s.step("Could not drop the schema %s: %v", Schema, err)
		}
	}()
	s.l = l
	if cfg.UIAddr != "" {
		url, stop, err := s.serveUI(ctx)
		if err != nil {
			return Report{}, err
		}
		defer stop() // before Close drops the schema
		s.rep.UI = url
	}
	if err := s.tell(ctx); err != nil {
		l.Stop(context.WithoutCancel(ctx))
		return Report{}, err
	}
	res, err := l.Check(ctx)
	if err != nil {
		return Report{}, err
	}
	tokens, err := l.Tokens(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := s.rep
	rep.Result, rep.Tokens, rep.Seconds = res, tokens, time.Since(start).Seconds()
	rep.check()
	if cfg.Hold != nil {
		cfg.Hold(ctx, rep)
	}
	return rep, nil
}

// step tells a step of the story.
func (s *story) step(format string, args ...any) {
	s.emit(Event{Kind: Step, Text: fmt.Sprintf(format, args...)})
}

// detail continues the step told last.
func (s *story) detail(format string, args ...any) {
	s.emit(Event{Kind: Detail, Text: fmt.Sprintf(format, args...)})
}

func (s *story) emit(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Events(e)
}
