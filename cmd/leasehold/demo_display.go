package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// display writes the story: lines stamped with the time since the start,
// and a progress bar, redrawn in place on a terminal and printed as a plain
// line now and then otherwise.
type display struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	start     time.Time
	bar       string    // the progress bar, drawn under the story on a terminal
	lastPlain time.Time // when the bar was last printed as a plain line
	lastShown string    // the last bar printed as a plain line
}

// plainEvery is how often the progress is printed when not on a terminal.
const plainEvery = 2 * time.Second

func newDisplay(w io.Writer, tty bool) *display {
	return &display{w: w, tty: tty, start: time.Now()}
}

// say prints one step of the story, stamped with the time since the start.
func (s *display) say(format string, args ...any) {
	s.print(fmt.Sprintf("%6.2fs  %s", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...)))
}

// line prints a line of the story without a time stamp.
func (s *display) line(format string, args ...any) {
	s.print(fmt.Sprintf(format, args...))
}

func (s *display) print(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty && s.bar != "" {
		fmt.Fprint(s.w, "\r\033[K")
	}
	fmt.Fprintln(s.w, line)
	if s.tty && s.bar != "" {
		fmt.Fprint(s.w, s.bar)
	}
}

// progress shows how many of total jobs are applied and enqueued.
func (s *display) progress(applied, enqueued, total int) {
	const width = 30
	filled := 0
	if total > 0 {
		filled = min(width, applied*width/total)
	}
	bar := fmt.Sprintf("        [%s%s] %4d/%d jobs applied, %d enqueued",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), applied, total, enqueued)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty {
		s.bar = bar
		fmt.Fprint(s.w, "\r\033[K"+bar)
		return
	}
	if bar != s.lastShown && time.Since(s.lastPlain) >= plainEvery {
		s.lastPlain, s.lastShown = time.Now(), bar
		fmt.Fprintln(s.w, bar)
	}
}

// done removes the progress bar from a terminal.
func (s *display) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty && s.bar != "" {
		fmt.Fprint(s.w, "\r\033[K")
	}
	s.bar = ""
}

// ownersHeader is the header of the ownership table.
func ownersHeader(n int) string {
	var b strings.Builder
	b.WriteString("        partition ")
	for p := range n {
		fmt.Fprintf(&b, "%3d", p)
	}
	return b.String()
}

// ownersRow renders a group's status as one row of the ownership table:
// each partition's holder (the worker's number; "-" when no lease is held),
// then how many partitions each worker holds.
func ownersRow(st partition.Status, names []string) string {
	var b strings.Builder
	b.WriteString("owners   ")
	count := make(map[string]int)
	for _, ps := range st.Partitions {
		cell := "-"
		if ps.Held {
			cell = ps.Owner
			for i, n := range names {
				if n == ps.Owner {
					cell = fmt.Sprint(i + 1)
				}
			}
			count[ps.Owner]++
		}
		fmt.Fprintf(&b, "%3s", cell)
	}
	b.WriteString("   ")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s:%d", n, count[n])
	}
	return b.String()
}
