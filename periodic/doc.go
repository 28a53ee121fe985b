// Package periodic enqueues jobs on schedules declared in code: cron
// expressions and fixed intervals, each slot (a schedule's firing time)
// exactly once per group.
//
// Every worker of a group may run a Scheduler; one of them at a time is the
// leader, through the lease "periodic/<group>". The leader enqueues each
// slot that comes due in a transaction fenced by its lease token, which
// also records the slot in a table keyed by (group, schedule, slot): a
// stale leader (paused or cut off past its lease) cannot commit, and a
// slot can never be recorded, so enqueued, twice. A new leader resumes
// after the latest recorded slot of each schedule; the slots that came due
// while no leader ran are handled by the schedule's MissedPolicy (run once,
// or skip).
//
// Exactly once covers the enqueue: each slot's job is enqueued once. That
// the job then runs once is the queue's guarantee (fenced completion; use a
// transactional handler for effects in the same database).
//
// See docs/periodic.md.
package periodic
