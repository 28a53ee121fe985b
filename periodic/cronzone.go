package periodic

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// zoned is a cron expression in a time zone, with cron's rules across
// offset changes (daylight saving), as in Vixie cron:
//
//   - a fixed-time expression (its minute and hour fields name specific
//     values, as "30 2 * * *" or @daily) fires once per matching wall-clock
//     time: a time that a change skips (spring forward) fires at the
//     instant of the change, right after the jump; a time that a change
//     repeats (fall back) fires at its first occurrence only;
//   - any other expression (a '*' in its minute or hour field, as
//     "0 * * * *" or @hourly) fires at every instant whose wall-clock time
//     matches: at both occurrences of a repeated time, never in a skipped
//     one, so an hourly schedule fires every real hour.
//
// Its slots are a fixed set of instants, the same for every scheduler.
type zoned struct {
	wall  *cron.SpecSchedule // the expression on wall-clock times, written as UTC
	loc   *time.Location
	fixed bool
}

// fixedTime reports whether spec (a parsed expression or descriptor) is a
// fixed-time expression: no '*' (or '?') in its minute and hour fields.
func fixedTime(spec string) bool {
	if strings.HasPrefix(spec, "@") {
		return spec != "@hourly"
	}
	f := strings.Fields(spec)
	return len(f) >= 2 && !strings.ContainsAny(f[0]+f[1], "*?")
}

// wallOf returns t's wall-clock time in loc, written as a UTC time.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// Next returns the first slot after t (in UTC), the zero time if there is
// none in the following five years. It walks the zone's periods of one
// offset from t's: in each, a slot is an instant whose wall-clock time
// matches (for a fixed-time expression, not one shown already before a
// change that set the clocks back); between two, the change itself is the
// slot of a fixed-time expression that matches a wall-clock time it skips.
func (z *zoned) Next(t time.Time) time.Time {
	after := t.UTC() // the slot is after this instant
	at := after      // in the period of this one
	for range 64 {
		in := at.In(z.loc)
		_, sec := in.Zone()
		off := time.Duration(sec) * time.Second
		start, end := in.ZoneBounds() // zero: the period goes on forever
		floor := after.Add(off)       // the slot's wall-clock time is after this
		if z.fixed && !start.IsZero() {
			_, psec := start.Add(-time.Nanosecond).In(z.loc).Zone()
			if shown := start.Add(time.Duration(psec) * time.Second); shown.After(floor) {
				floor = shown.Add(-time.Nanosecond) // the clocks were set back: these came before
			}
		}
		w := z.wall.Next(floor)
		if w.IsZero() {
			return time.Time{}
		}
		if u := w.Add(-off); end.IsZero() || u.Before(end) {
			return u
		}
		_, nsec := end.In(z.loc).Zone()
		if skipped := end.Add(time.Duration(nsec) * time.Second); z.fixed && skipped.After(end.Add(off)) {
			if g := z.wall.Next(end.Add(off).Add(-time.Nanosecond)); !g.IsZero() && g.Before(skipped) {
				return end.UTC() // a wall-clock time the change skips: fire at the change
			}
		}
		after, at = end.Add(-time.Nanosecond), end
	}
	return time.Time{}
}
