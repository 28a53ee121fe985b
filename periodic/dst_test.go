package periodic_test

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/periodic"
)

// slotsFrom returns the slots of sc in (from, to].
func slotsFrom(t *testing.T, sc periodic.Schedule, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for at := from; ; {
		n, err := periodic.Next(sc, at)
		if err != nil {
			t.Fatal(err)
		}
		if n.IsZero() || n.After(to) {
			return out
		}
		if !n.After(at) {
			t.Fatalf("next after %v is %v", at, n)
		}
		out, at = append(out, n), n
	}
}

// A fixed-time cron schedule fires once per local day across both
// daylight-saving changes of Europe/Paris: on the spring-forward day
// (29 March 2026, 02:00 CET -> 03:00 CEST) its 02:30, which does not
// exist, fires right after the jump (03:00 CEST, 01:00 UTC); on the
// fall-back day (25 October 2026, 03:00 CEST -> 02:00 CET) its 02:30,
// which happens twice, fires at its first occurrence only. The control: an
// hourly schedule ('*' in the hour field) fires every real hour through
// both changes, both 02:00s of the fall-back day included. Each slot
// agrees with Prev and with the missed count, so each stays one instant
// that every scheduler computes.
func TestCronAcrossDaylightSaving(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	job := tickJob("x")
	daily := periodic.Schedule{Name: "daily", Cron: "30 2 * * *", Location: paris, Job: job}
	hourly := periodic.Schedule{Name: "hourly", Cron: "0 * * * *", Location: paris, Job: job}
	atDaily := periodic.Schedule{Name: "at-daily", Cron: "@daily", Location: paris, Job: job}
	for _, c := range []struct {
		name     string
		sc       periodic.Schedule
		from, to string
		want     []string
	}{
		{"daily, spring forward", daily, "2026-03-27T00:00:00Z", "2026-03-31T00:00:00Z",
			[]string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"daily, fall back", daily, "2026-10-23T00:00:00Z", "2026-10-27T00:00:00Z",
			[]string{"2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"@daily, both changes (midnight exists)", atDaily, "2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z",
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"}},
		{"hourly, spring forward", hourly, "2026-03-28T22:30:00Z", "2026-03-29T03:00:00Z",
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z"}},
		{"hourly, fall back", hourly, "2026-10-24T22:30:00Z", "2026-10-25T03:00:00Z",
			[]string{"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var want []time.Time
			for _, s := range c.want {
				want = append(want, utc(s))
			}
			from, to := utc(c.from), utc(c.to)
			got := slotsFrom(t, c.sc, from, to)
			if !equalTimes(got, want) {
				t.Fatalf("slots in (%v, %v]:\n got %v\nwant %v", from, to, got, want)
			}
			for _, at := range got {
				prev, ok, err := periodic.Prev(c.sc, at.Add(time.Millisecond))
				if err != nil || !ok || !prev.Equal(at) {
					t.Errorf("prev(%v+1ms) = %v %v %v", at, prev, ok, err)
				}
			}
			if n, latest, err := periodic.Missed(c.sc, from, to); err != nil || n != len(want) || !latest.Equal(want[len(want)-1]) {
				t.Errorf("missed in (%v, %v]: %d, latest %v, %v; want %d, %v", from, to, n, latest, err, len(want), want[len(want)-1])
			}
		})
	}
}
