package main

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/fakeclock"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/lease"
	"github.com/leasehold/leasehold/periodic"
	"github.com/leasehold/leasehold/queue"
)

type cliTick struct{}

func (cliTick) Kind() string { return "tick" }

// periodic list shows a schedule's leader, last and next slots while a
// scheduler leads, and no leader once it stopped.
func TestPeriodicList(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	db := pgtest.DBOn(t, pgtest.PoolURL(t, url))
	pgtest.Must(t, runJSON(t, &admin.GroupResult{}, "", "groups", "create", "mail", "--partitions", "4", "--database-url", url))
	clk := fakeclock.New(time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC))
	s, err := periodic.New(db, periodic.Config{Group: "mail", ID: "w1", Clock: clk, Lease: lease.Config{TTL: 2 * time.Second},
		Schedules: []periodic.Schedule{{Name: "digest", Cron: "*/5 * * * *", Missed: periodic.MissedSkip,
			Job: func(time.Time) queue.Job { return queue.Job{Args: cliTick{}} }}}})
	pgtest.Must(t, err)
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	if !clk.WaitPending(1, 10*time.Second) {
		t.Fatal("the scheduler never waited for a slot")
	}
	clk.Advance(5 * time.Minute)
	var got []admin.ScheduleInfo
	slot := time.Date(2026, 5, 1, 12, 5, 0, 0, time.UTC)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pgtest.Must(t, runJSON(t, &got, "", "periodic", "list", "mail", "--database-url", url))
		if len(got) == 1 && got[0].LastSlot != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot recorded: %+v", got)
		}
	}
	g := got[0]
	token, _ := s.Leading()
	if g.Name != "digest" || g.Spec != "*/5 * * * *" || g.Missed != "skip" || !g.LastSlot.Equal(slot) ||
		g.Next == nil || !g.Next.Equal(slot.Add(5*time.Minute)) || g.LastJobID == 0 || g.LastOutcome != "enqueued" || g.LastMissed != 0 ||
		g.Leader != "w1" || !g.LeaderLive || g.LeaderToken != int64(token) || g.LastToken != int64(token) {
		t.Fatalf("periodic list --json: %+v (leader token %d)", g, token)
	}
	out, err := runIn(t, "", "periodic", "list", "--database-url", url)
	pgtest.Must(t, err)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "GROUP") ||
		!strings.Contains(lines[1], "w1 (token") || !strings.Contains(lines[1], "2026-05-01T12:10:00Z") {
		t.Errorf("periodic list:\n%s", out)
	}
	pgtest.Must(t, s.Stop(ctx))
	pgtest.Must(t, runJSON(t, &got, "", "periodic", "list", "--database-url", url))
	if len(got) != 1 || got[0].LeaderLive {
		t.Errorf("after Stop: %+v; want no live leader", got)
	}
	pgtest.Must(t, runJSON(t, &got, "", "periodic", "list", "other", "--database-url", url))
	if len(got) != 0 {
		t.Errorf("another group: %+v", got)
	}
}

// periodic list tells a slot whose job was a duplicate of a pending job
// with the same UniqueKey (no job enqueued) from a skipped one.
func TestPeriodicListDuplicate(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	url := pgtest.MigratedURL(t)
	db := pgtest.DBOn(t, pgtest.PoolURL(t, url))
	pgtest.Must(t, runJSON(t, &admin.GroupResult{}, "", "groups", "create", "mail", "--partitions", "4", "--database-url", url))
	clk := fakeclock.New(time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC))
	s, err := periodic.New(db, periodic.Config{Group: "mail", ID: "w1", Clock: clk, Lease: lease.Config{TTL: 2 * time.Second},
		Schedules: []periodic.Schedule{{Name: "sync", Every: time.Minute,
			Job: func(time.Time) queue.Job { return queue.Job{Args: cliTick{}, UniqueKey: "sync"} }}}})
	pgtest.Must(t, err)
	pgtest.Must(t, s.Start(ctx))
	defer s.Stop(ctx)
	var got []admin.ScheduleInfo
	for m := 1; m <= 2; m++ {
		if !clk.WaitPending(1, 10*time.Second) {
			t.Fatal("the scheduler never waited for a slot")
		}
		clk.Advance(time.Date(2026, 5, 1, 12, m, 0, 0, time.UTC).Sub(clk.Now()))
		slot := time.Date(2026, 5, 1, 12, m, 0, 0, time.UTC)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got = nil // omitted fields must not keep an earlier value
			pgtest.Must(t, runJSON(t, &got, "", "periodic", "list", "mail", "--database-url", url))
			if len(got) == 1 && got[0].LastSlot != nil && got[0].LastSlot.Equal(slot) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("slot %v not recorded: %+v", slot, got)
			}
		}
	}
	if g := got[0]; g.LastJobID != 0 || g.LastOutcome != "duplicate" {
		t.Fatalf("second slot of a pending UniqueKey: %+v; want no job, outcome duplicate", g)
	}
	out, err := runIn(t, "", "periodic", "list", "--database-url", url)
	pgtest.Must(t, err)
	if !strings.Contains(out, "duplicate") || strings.Contains(out, "skipped") {
		t.Errorf("periodic list:\n%s", out)
	}
}
