package ui

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// funcs are the templates' helpers. None returns template.HTML: every value
// is escaped by html/template.
var funcs = template.FuncMap{
	"ago":      ago,
	"utc":      utc,
	"ms":       msDuration,
	"dur":      duration,
	"age":      age,
	"pct":      pct,
	"rate":     rate,
	"jsonText": jsonText,
	"query":    query,
	"seg":      url.PathEscape,
	"deref":    func(p *time.Time) time.Time { return derefTime(p) },
}

// ago says when t was relative to now (the database clock): "3s ago",
// "in 2m", "now"; "" for a zero t.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d < 0:
		return "in " + short(-d)
	}
	return short(d) + " ago"
}

// short rounds d to its largest unit: 45s, 3m, 5h, 2d.
func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// utc is t's absolute time, for title attributes.
func utc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// derefTime returns *p, the zero time for nil.
func derefTime(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}

// msDuration formats milliseconds as a short duration ("" for 0).
func msDuration(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return duration(time.Duration(ms) * time.Millisecond)
}

// duration formats d shortly: 850ms, 12s, 3m, 2h; a negative d with a
// minus sign ("-3s"), never "" (a page would show a unit with no number).
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + duration(-d)
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return short(d)
}

// age says how long ago something happened d ago, as ago does: "850ms
// ago", "3m ago"; "now" for a d slightly below zero (the database clock
// rounds: a heartbeat can be read as a little in the future) and "in 2s"
// for one at least a second in the future.
func age(d time.Duration) string {
	switch {
	case d <= -time.Second:
		return "in " + short(-d)
	case d < 0:
		return "now"
	}
	return duration(d) + " ago"
}

// pct is part of whole in percent, rounded down ("0" when whole is 0).
func pct(part, whole int64) int64 {
	if whole <= 0 {
		return 0
	}
	return part * 100 / whole
}

// rate formats items per second.
func rate(r float64) string {
	switch {
	case r <= 0 || math.IsNaN(r):
		return "–"
	case r < 10:
		return strconv.FormatFloat(r, 'f', 2, 64) + "/s"
	}
	return strconv.FormatFloat(r, 'f', 0, 64) + "/s"
}

// jsonText pretty-prints JSON text (as is when it is not valid JSON).
func jsonText(raw fmt.Stringer) string {
	s := raw.String()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // html/template escapes it
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return s
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// query returns "?" and the URL query of its key-value pairs, leaving out
// empty strings, zero int64s (ids) and nil *ints ("" when none is left); an
// int (a partition) is kept even when 0.
func query(kv ...any) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		k := fmt.Sprint(kv[i])
		switch v := kv[i+1].(type) {
		case string:
			if v != "" {
				q.Set(k, v)
			}
		case int64:
			if v != 0 {
				q.Set(k, strconv.FormatInt(v, 10))
			}
		case int:
			q.Set(k, strconv.Itoa(v))
		case *int:
			if v != nil {
				q.Set(k, strconv.Itoa(*v))
			}
		default:
			if s := fmt.Sprint(v); s != "" {
				q.Set(k, s)
			}
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// bar is the height of a throughput bar of v where top is the largest
// value: 0 to chartHeight, at least 1 for a nonzero v.
func bar(v, top int64) int64 {
	if v <= 0 || top <= 0 {
		return 0
	}
	return max(1, v*chartHeight/top)
}
