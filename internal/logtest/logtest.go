// Package logtest records structured log records for tests that count what
// a component logs.
package logtest

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// Record is one recorded log record: its level, message and attributes
// (those added with Logger.With included), by key.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]slog.Value
}

// Recorder is a slog.Handler that keeps every record at or above its
// level. Its zero value records from slog.LevelInfo up. It is safe for
// concurrent use.
type Recorder struct {
	// Level is the lowest level recorded. Defaults to slog.LevelInfo.
	Level slog.Level

	mu      sync.Mutex
	records []Record
}

// New returns a Recorder of the records at or above level and a logger
// writing to it.
func New(level slog.Level) (*Recorder, *slog.Logger) {
	r := &Recorder{Level: level}
	return r, slog.New(r)
}

// Enabled reports whether level is recorded.
func (r *Recorder) Enabled(_ context.Context, level slog.Level) bool { return level >= r.Level }

// Handle records rec.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	return r.add(rec, nil)
}

// WithAttrs returns a handler recording into r, adding attrs to every
// record.
func (r *Recorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &child{r: r, attrs: attrs}
}

// WithGroup returns r: groups are flattened (the components log none).
func (r *Recorder) WithGroup(string) slog.Handler { return r }

func (r *Recorder) add(rec slog.Record, with []slog.Attr) error {
	out := Record{Level: rec.Level, Message: rec.Message, Attrs: make(map[string]slog.Value)}
	for _, a := range with {
		out.Attrs[a.Key] = a.Value.Resolve()
	}
	rec.Attrs(func(a slog.Attr) bool {
		out.Attrs[a.Key] = a.Value.Resolve()
		return true
	})
	r.mu.Lock()
	r.records = append(r.records, out)
	r.mu.Unlock()
	return nil
}

// Records returns a copy of the records so far.
func (r *Recorder) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Reset forgets the records so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.records = nil
	r.mu.Unlock()
}

// Count returns the number of records at exactly level whose message is
// msg; an empty msg counts every message.
func (r *Recorder) Count(level slog.Level, msg string) int {
	n := 0
	for _, rec := range r.Records() {
		if rec.Level == level && (msg == "" || rec.Message == msg) {
			n++
		}
	}
	return n
}

// Summary returns one line per (level, message) with its count, sorted,
// for test failure messages.
func (r *Recorder) Summary() string {
	counts := map[string]int{}
	for _, rec := range r.Records() {
		counts[fmt.Sprintf("%-5s %s", rec.Level, rec.Message)]++
	}
	lines := make([]string, 0, len(counts))
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%5d %s", n, k))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// child is a Recorder with attributes added by Logger.With.
type child struct {
	r     *Recorder
	attrs []slog.Attr
}

func (c *child) Enabled(ctx context.Context, level slog.Level) bool { return c.r.Enabled(ctx, level) }
func (c *child) Handle(_ context.Context, rec slog.Record) error    { return c.r.add(rec, c.attrs) }
func (c *child) WithGroup(string) slog.Handler                      { return c }
func (c *child) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &child{r: c.r, attrs: append(append([]slog.Attr(nil), c.attrs...), attrs...)}
}
