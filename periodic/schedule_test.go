package periodic_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

type tick struct {
	Schedule string    `json:"schedule"`
	Slot     time.Time `json:"slot"`
}

func (tick) Kind() string { return "tick" }

func tickJob(name string) func(time.Time) queue.Job {
	return func(slot time.Time) queue.Job { return queue.Job{Args: tick{Schedule: name, Slot: slot}} }
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestNextCronAndEvery(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	job := tickJob("x")
	cases := []struct {
		name string
		sc   periodic.Schedule
		at   string
		want string
	}{
		{"every 5 minutes", periodic.Schedule{Cron: "*/5 * * * *"}, "2026-03-01T10:02:30Z", "2026-03-01T10:05:00Z"},
		{"on a slot: the next one", periodic.Schedule{Cron: "*/5 * * * *"}, "2026-03-01T10:05:00Z", "2026-03-01T10:10:00Z"},
		{"hourly", periodic.Schedule{Cron: "@hourly"}, "2026-03-01T10:00:01Z", "2026-03-01T11:00:00Z"},
		{"daily in Paris", periodic.Schedule{Cron: "30 2 * * *", Location: paris}, "2026-07-01T00:00:00Z", "2026-07-01T00:30:00Z"},
		{"weekdays", periodic.Schedule{Cron: "0 9 * * 1-5"}, "2026-03-06T09:00:00Z", "2026-03-09T09:00:00Z"}, // Fri -> Mon
		{"interval, aligned", periodic.Schedule{Every: 15 * time.Minute}, "2026-03-01T10:07:12Z", "2026-03-01T10:15:00Z"},
		{"interval on a slot", periodic.Schedule{Every: 250 * time.Millisecond}, "2026-03-01T10:00:00.5Z", "2026-03-01T10:00:00.75Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.sc.Name, c.sc.Job = "x", job
			got, err := periodic.Next(c.sc, utc(c.at))
			if err != nil {
				t.Fatal(err)
			}
			if want := utc(c.want); !got.Equal(want) || got.Location() != time.UTC {
				t.Fatalf("next after %s = %v, want %v (UTC)", c.at, got, want)
			}
			prev, ok, err := periodic.Prev(c.sc, got.Add(time.Millisecond))
			if err != nil || !ok || !prev.Equal(got) {
				t.Fatalf("prev(%v+1ms) = %v %v %v, want %v", got, prev, ok, err, got)
			}
		})
	}
}

func TestMissedCounts(t *testing.T) {
	cron := periodic.Schedule{Name: "c", Cron: "*/10 * * * *", Job: tickJob("c")}
	every := periodic.Schedule{Name: "e", Every: time.Minute, Job: tickJob("e")}
	for _, c := range []struct {
		sc     periodic.Schedule
		a, b   string
		n      int
		latest string
	}{
		{cron, "2026-03-01T10:00:00Z", "2026-03-01T10:45:00Z", 4, "2026-03-01T10:40:00Z"},
		{cron, "2026-03-01T10:00:00Z", "2026-03-01T10:40:00Z", 4, "2026-03-01T10:40:00Z"},
		{cron, "2026-03-01T10:00:00Z", "2026-03-01T10:09:59Z", 0, ""},
		{every, "2026-03-01T10:00:00Z", "2026-03-01T10:03:00Z", 3, "2026-03-01T10:03:00Z"},
		{every, "2026-03-01T10:00:30Z", "2026-03-01T10:03:10Z", 3, "2026-03-01T10:03:00Z"}, // an anchor between slots
		{every, "2026-03-01T10:00:00Z", "2026-03-01T09:00:00Z", 0, ""},
		{every, "2026-03-01T10:00:00Z", "2028-03-01T10:00:00Z", 100_000, "2028-03-01T10:00:00Z"}, // capped count
		{cron, "2020-01-01T00:00:00Z", "2026-03-01T10:45:00Z", 100_000, "2026-03-01T10:40:00Z"},  // capped, latest still exact
	} {
		n, latest, err := periodic.Missed(c.sc, utc(c.a), utc(c.b))
		if err != nil {
			t.Fatal(err)
		}
		if n != c.n || (c.latest == "" && !latest.IsZero()) || (c.latest != "" && !latest.Equal(utc(c.latest))) {
			t.Errorf("%s (%s, %s]: %d slots, latest %v; want %d, %s", c.sc.Name, c.a, c.b, n, latest, c.n, c.latest)
		}
	}
}

func TestBadSchedules(t *testing.T) {
	job := tickJob("x")
	for _, c := range []struct {
		sc   periodic.Schedule
		want string
	}{
		{periodic.Schedule{Cron: "* * * * *", Job: job}, "Name"},
		{periodic.Schedule{Name: strings.Repeat("n", 101), Cron: "* * * * *", Job: job}, "Name"},
		{periodic.Schedule{Name: "x", Cron: "* * * * *"}, "Job is required"},
		{periodic.Schedule{Name: "x", Job: job}, "exactly one of Cron and Every"},
		{periodic.Schedule{Name: "x", Cron: "* * * * *", Every: time.Minute, Job: job}, "exactly one of Cron and Every"},
		{periodic.Schedule{Name: "x", Cron: "61 * * * *", Job: job}, "cannot parse"},
		{periodic.Schedule{Name: "x", Cron: "* * * *", Job: job}, "cannot parse"},
		{periodic.Schedule{Name: "x", Cron: "@every 5m", Job: job}, "use Every"},
		{periodic.Schedule{Name: "x", Cron: "CRON_TZ=UTC * * * * *", Job: job}, "Location"},
		{periodic.Schedule{Name: "x", Cron: "0 0 30 2 *", Job: job}, "never fires"},
		{periodic.Schedule{Name: "x", Every: time.Millisecond, Job: job}, "below the minimum"},
		{periodic.Schedule{Name: "x", Every: time.Second + time.Microsecond, Job: job}, "whole number of milliseconds"},
		{periodic.Schedule{Name: "x", Every: time.Second, Location: time.Local, Job: job}, "Cron only"},
		{periodic.Schedule{Name: "x", Every: time.Second, Missed: 7, Job: job}, "unknown policy"},
	} {
		cfg := periodic.Config{Group: "g", Schedules: []periodic.Schedule{{Name: "ok", Every: time.Second, Job: job}, c.sc}}
		_, err := periodic.New(dummyDB(t), cfg)
		var se *periodic.ScheduleError
		if !errors.Is(err, periodic.ErrInvalidSchedule) || !errors.As(err, &se) {
			t.Errorf("%+v: err %v, want a *ScheduleError", c.sc, err)
			continue
		}
		if se.Index != 1 || se.Name != c.sc.Name || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v (index %d), want index 1 and %q", c.sc, err, se.Index, c.want)
		}
	}
	_, err := periodic.New(dummyDB(t), periodic.Config{Group: "g", Schedules: []periodic.Schedule{
		{Name: "twice", Every: time.Second, Job: job}, {Name: "twice", Cron: "@daily", Job: job}}})
	if !errors.Is(err, periodic.ErrInvalidSchedule) || !strings.Contains(err.Error(), "declared twice") {
		t.Errorf("duplicate name: %v", err)
	}
}

func TestBadConfig(t *testing.T) {
	ok := []periodic.Schedule{{Name: "x", Every: time.Second, Job: tickJob("x")}}
	for _, c := range []struct {
		cfg  periodic.Config
		want string
	}{
		{periodic.Config{Schedules: ok}, "Group"},
		{periodic.Config{Group: strings.Repeat("g", 101), Schedules: ok}, "Group"},
		{periodic.Config{Group: "g"}, "Schedules"},
		{periodic.Config{Group: "g", Schedules: ok, Retention: -1}, "Retention"},
		{periodic.Config{Group: "g", Schedules: ok, Lease: leaseWithOwner()}, "Lease.Owner"},
		{periodic.Config{Group: "g", Schedules: ok, Lease: leaseTTL(10 * time.Millisecond)}, "Lease"},
	} {
		_, err := periodic.New(dummyDB(t), c.cfg)
		if !errors.Is(err, periodic.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalidConfig about %s", c.cfg, err, c.want)
		}
	}
	s, err := periodic.New(dummyDB(t), periodic.Config{Group: "g", Schedules: ok})
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if err := s.Stop(t.Context()); err != nil {
		t.Fatalf("Stop of a scheduler never started: %v", err)
	}
	if err := s.Start(t.Context()); !errors.Is(err, periodic.ErrStopped) {
		t.Fatalf("Start after Stop: %v", err)
	}
}

// Grace defaults to 2s or twice the lease's MaxBackoff (a follower's wait
// between reads of the lease row), whichever is longer; negative means none.
func TestGraceDefault(t *testing.T) {
	db := pgtest.DBOn(t, pgtest.Pool(t))
	sc := []periodic.Schedule{{Name: "x", Every: time.Second, Job: tickJob("x")}}
	for _, c := range []struct {
		grace, maxBackoff, want time.Duration
	}{
		{0, 0, 2 * time.Second},
		{0, 500 * time.Millisecond, 2 * time.Second},
		{0, 3 * time.Second, 6 * time.Second},
		{5 * time.Second, 3 * time.Second, 5 * time.Second},
		{-1, 3 * time.Second, 0},
	} {
		s, err := periodic.New(db, periodic.Config{Group: "g", Schedules: sc, Grace: c.grace,
			Lease: lease.Config{MaxBackoff: c.maxBackoff}})
		pgtest.Must(t, err)
		if got := periodic.Grace(s); got != c.want {
			t.Errorf("Grace %v, MaxBackoff %v: %v; want %v", c.grace, c.maxBackoff, got, c.want)
		}
		pgtest.Must(t, s.Stop(pgtest.Context(t)))
	}
}
