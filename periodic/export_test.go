package periodic

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/fence"
)

// SetBeforeCommit makes every slot transaction of s call f after its
// writes, before the fence check and COMMIT. Call it before Start.
func SetBeforeCommit(s *Scheduler, f func(ctx context.Context, token fence.Token, slots []Slot)) {
	s.hooks.beforeCommit = f
}

// SetAttempt makes s report the outcome of each slot transaction. Call it
// before Start.
func SetAttempt(s *Scheduler, f func(token fence.Token, slots []Slot, err error)) {
	s.hooks.attempt = f
}

// DisableFence makes s commit slot transactions without the fence check:
// the negative control. Call it before Start.
func DisableFence(s *Scheduler) { s.hooks.noFence = true }

// SlotsBetween returns how many slots of sc lie strictly between a and b.
func SlotsBetween(sc Schedule, a, b time.Time) (int, error) {
	c, err := compile(0, sc)
	if err != nil {
		return 0, err
	}
	n, latest := c.missed(a, b)
	if latest.Equal(b) {
		n--
	}
	return n, nil
}

// Next returns the first slot of sc after t.
func Next(sc Schedule, t time.Time) (time.Time, error) {
	c, err := compile(0, sc)
	if err != nil {
		return time.Time{}, err
	}
	return c.next(t), nil
}

// Prev returns the latest slot of sc at or before t.
func Prev(sc Schedule, t time.Time) (time.Time, bool, error) {
	c, err := compile(0, sc)
	if err != nil {
		return time.Time{}, false, err
	}
	at, ok := c.prev(t)
	return at, ok, nil
}

// Missed returns how many slots of sc lie in (a, b] and the latest.
func Missed(sc Schedule, a, b time.Time) (int, time.Time, error) {
	c, err := compile(0, sc)
	if err != nil {
		return 0, time.Time{}, err
	}
	n, latest := c.missed(a, b)
	return n, latest, nil
}

// Grace returns s's Config.Grace, defaults applied.
func Grace(s *Scheduler) time.Duration { return s.cfg.Grace }
