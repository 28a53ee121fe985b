package periodic

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/leasehold/leasehold/queue"
)

// MaxNameLen is the longest schedule name, in bytes.
const MaxNameLen = 100

// MinEvery is the shortest Every a schedule may have.
const MinEvery = 100 * time.Millisecond

// Schedule declares a periodic job: when it fires (Cron or Every) and the
// job each firing, a slot, enqueues.
type Schedule struct {
	// Name identifies the schedule in its group: slots are recorded under
	// it, so renaming a schedule starts it afresh. Required; 1 to 100
	// bytes, unique among the group's schedules.
	Name string
	// Cron is a standard five-field cron expression (minute, hour, day of
	// month, month, day of week), or a descriptor: @yearly, @monthly,
	// @weekly, @daily, @hourly. "@every" is refused: use Every, whose
	// slots are aligned. Exactly one of Cron and Every is required.
	Cron string
	// Every fires the schedule at every multiple of it since the zero
	// time (so an interval that divides a day fires at UTC midnight and
	// evenly after it): every scheduler computes the same slots. At least
	// MinEvery and a whole number of milliseconds. Exactly one of Cron and
	// Every is required.
	Every time.Duration
	// Location is the time zone of Cron. Cron only. Defaults to UTC.
	// Across a daylight-saving change, a fixed-time expression (no '*' in
	// its minute and hour fields, as "30 2 * * *") fires once per local
	// time: a time the change skips fires right after the jump, a time it
	// repeats fires at its first occurrence; any other expression (as
	// "0 * * * *") fires at every real instant whose local time matches.
	Location *time.Location
	// Job returns the job to enqueue for slot (in UTC). Its Group must be
	// empty or the scheduler's group (it is set to the latter). Required.
	Job func(slot time.Time) queue.Job
	// Missed says what a new leader does with the slots that came due while
	// no leader ran. Defaults to MissedRunOnce.
	Missed MissedPolicy
}

// MissedPolicy says what a new leader does with the slots of a schedule
// that came due while no leader ran (more than Config.Grace before it took
// the lease).
type MissedPolicy int

const (
	// MissedRunOnce enqueues one job for the latest missed slot; the
	// earlier ones are collapsed into it (counted as missed).
	MissedRunOnce MissedPolicy = iota
	// MissedSkip enqueues none of them: the schedule resumes at its next
	// slot. The latest missed slot is recorded as skipped.
	MissedSkip
)

// String returns "run-once" or "skip".
func (p MissedPolicy) String() string {
	switch p {
	case MissedRunOnce:
		return "run-once"
	case MissedSkip:
		return "skip"
	}
	return fmt.Sprintf("MissedPolicy(%d)", int(p))
}

// parser reads standard cron expressions and descriptors (no seconds).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// sched is a validated Schedule.
type sched struct {
	Schedule
	spec string // Cron, or "every <Every>"
	cron *zoned // nil for Every
}

// compile validates s (the i-th schedule) and returns it ready to use.
func compile(i int, s Schedule) (*sched, error) {
	bad := func(reason string, err error) error {
		return &ScheduleError{Index: i, Name: s.Name, Reason: reason, Err: err}
	}
	switch {
	case s.Name == "" || len(s.Name) > MaxNameLen:
		return nil, bad(fmt.Sprintf("Name: %d bytes, must be 1 to %d", len(s.Name), MaxNameLen), nil)
	case !utf8.ValidString(s.Name) || strings.IndexByte(s.Name, 0) >= 0:
		return nil, bad("Name: not valid UTF-8 or contains a NUL byte", nil)
	case s.Job == nil:
		return nil, bad("Job is required", nil)
	case s.Missed != MissedRunOnce && s.Missed != MissedSkip:
		return nil, bad(fmt.Sprintf("Missed: unknown policy %d", int(s.Missed)), nil)
	case (s.Cron == "") == (s.Every == 0):
		return nil, bad("set exactly one of Cron and Every", nil)
	}
	c := &sched{Schedule: s}
	if s.Every != 0 {
		switch {
		case s.Every < MinEvery:
			return nil, bad(fmt.Sprintf("Every: %v is below the minimum %v", s.Every, MinEvery), nil)
		case s.Every%time.Millisecond != 0:
			return nil, bad(fmt.Sprintf("Every: %v is not a whole number of milliseconds", s.Every), nil)
		case s.Location != nil:
			return nil, bad("Location applies to Cron only", nil)
		}
		c.spec = "every " + s.Every.String()
		return c, nil
	}
	spec := strings.TrimSpace(s.Cron)
	if strings.HasPrefix(spec, "@every") {
		return nil, bad("Cron: @every fires relative to each scheduler's start; use Every", nil)
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, bad("Cron: set Location instead of a TZ= prefix", nil)
	}
	parsed, err := parser.Parse(spec)
	if err != nil {
		return nil, bad("Cron: cannot parse "+quote(s.Cron), err)
	}
	loc := s.Location
	if loc == nil {
		loc = time.UTC
	}
	ss, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, bad("Cron: "+quote(s.Cron)+" is not a cron expression", nil)
	}
	ss.Location = time.UTC // matched on wall-clock times: see zoned
	c.cron = &zoned{wall: ss, loc: loc, fixed: fixedTime(spec)}
	c.spec = spec
	if loc != time.UTC {
		c.spec += " (" + loc.String() + ")"
	}
	// A cron expression that matches no date (the 30th of February) has
	// no slot in the next five years: refuse it rather than never fire.
	if c.next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, bad("Cron: "+quote(s.Cron)+" never fires", nil)
	}
	return c, nil
}

// next returns the schedule's first slot after t, in UTC; the zero time if
// a cron expression has none in the following five years.
func (s *sched) next(t time.Time) time.Time {
	if s.cron == nil {
		return t.Truncate(s.Every).Add(s.Every).UTC()
	}
	return s.cron.Next(t).UTC()
}

// prev returns the schedule's latest slot at or before t, and false if it
// has none in the five years before t.
func (s *sched) prev(t time.Time) (time.Time, bool) {
	if s.cron == nil {
		return t.Truncate(s.Every).UTC(), true
	}
	// Look back over a doubling window: the first slot after t-w that is
	// not after t is a slot in the window; walk forward from it.
	for w := time.Minute; w < 6*365*24*time.Hour; w *= 2 {
		at := s.next(t.Add(-w))
		if at.IsZero() || at.After(t) {
			continue
		}
		for {
			n := s.next(at)
			if n.IsZero() || n.After(t) {
				return at, true
			}
			at = n
		}
	}
	return time.Time{}, false
}

// maxCount is how many missed slots a catch-up counts at most.
const maxCount = 100_000

// missed returns the slots in (after, upto]: how many (at most maxCount)
// and the latest one (the zero time for none).
func (s *sched) missed(after, upto time.Time) (n int, latest time.Time) {
	if !upto.After(after) {
		return 0, time.Time{}
	}
	if s.cron == nil {
		k := upto.Truncate(s.Every).Sub(after.Truncate(s.Every)) / s.Every
		if k <= 0 {
			return 0, time.Time{}
		}
		return int(min(k, maxCount)), upto.Truncate(s.Every).UTC()
	}
	for at := s.next(after); !at.IsZero() && !at.After(upto); at = s.next(at) {
		n, latest = n+1, at
		if n == maxCount {
			if l, ok := s.prev(upto); ok {
				latest = l
			}
			break
		}
	}
	return n, latest
}

// due returns the slots in (after, upto], at most limit of them, earliest
// first.
func (s *sched) due(after, upto time.Time, limit int) []time.Time {
	var out []time.Time
	for at := s.next(after); len(out) < limit && !at.IsZero() && !at.After(upto); at = s.next(at) {
		out = append(out, at)
	}
	return out
}
