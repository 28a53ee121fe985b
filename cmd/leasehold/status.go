package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/internal/admin"
)

// listAllBelow is the partition count up to which the table lists every
// partition without --all.
const listAllBelow = 32

func newStatusCmd() *cobra.Command {
	var db dbFlags
	var groups []string
	var all bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show partition owners, leases, job backlogs and members",
		Long: "status shows, per group (every group unless --group names some), each partition's owner, fencing\n" +
			"token, lease expiry and pending jobs, the keys whose due jobs wait behind a job that is not due\n" +
			"(the 5 most held up), what waits in the group's outbox to be published to Kafka (per partition:\n" +
			"segments, records, oldest; the 10 oldest unless --all), the limits the kinds declare and the keys\n" +
			"whose jobs they hold back (the 20 busiest, with the jobs held back per limit), and each member's\n" +
			"partitions and last heartbeat. Times are relative to the database clock. Groups of more than 32 partitions list only\n" +
			"the partitions that are not idle (idle: held by their desired owner, no pending job) unless --all;\n" +
			"--json gives everything.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, ctx, done, err := db.connect(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer done()
			rep, err := admin.ReadStatus(ctx, h, groups)
			if err != nil {
				return admin.Explain(ctx, err)
			}
			if db.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			return printStatus(cmd.OutOrStdout(), rep, all)
		},
	}
	db.add(cmd, false)
	cmd.Flags().StringArrayVar(&groups, "group", nil, "show this group (repeatable; default every group)")
	cmd.Flags().BoolVar(&all, "all", false, "list every partition, idle ones too")
	return cmd
}

// printStatus writes the report as tables; with all, every partition is
// listed.
func printStatus(w io.Writer, r admin.Status, all bool) error {
	if len(r.Groups) == 0 {
		fmt.Fprintln(w, noGroups)
		return nil
	}
	for i, g := range r.Groups {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := printGroup(w, g, all); err != nil {
			return err
		}
	}
	return nil
}

func printGroup(w io.Writer, g admin.GroupStatus, all bool) error {
	oldest := "-"
	if g.OldestDueMS > 0 {
		oldest = human(time.Duration(g.OldestDueMS) * time.Millisecond)
	}
	fmt.Fprintf(w, "group %s: %d partitions (%d held), members: %d live; jobs: %d pending, %d scheduled, %d retrying; oldest due %s\n\n",
		g.Group, g.PartitionCount, g.Held, g.LiveMembers, g.Pending, g.Scheduled, g.Retrying, oldest)
	printPauses(w, g.Paused)
	t := newTable(w, "PARTITION", "OWNER", "TOKEN", "EXPIRES IN", "PENDING", "RETRYING", "SCHEDULED", "OLDEST DUE")
	hidden := 0
	for _, p := range g.Partitions {
		if !all && g.PartitionCount > listAllBelow && p.Idle() {
			hidden++
			continue
		}
		owner, token, expires := "-", "-", "-"
		if p.Owner != "" {
			owner, token = p.Owner, fmt.Sprint(p.Token)
			left := time.Duration(*p.ExpiresInMS) * time.Millisecond
			switch {
			case p.Held:
				expires = human(left)
			case p.Released:
				expires = "released " + human(-left) + " ago"
			default:
				expires = "expired " + human(-left) + " ago"
			}
		}
		if p.Desired != "" && (p.Desired != p.Owner || !p.Held) {
			owner += " (desired " + orDash(p.Desired) + ")"
		}
		oldest := "-"
		if p.OldestDueMS > 0 {
			oldest = human(time.Duration(p.OldestDueMS) * time.Millisecond)
		}
		t.row(p.Partition, owner, token, expires, p.Pending, p.Retrying, p.Scheduled, oldest)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%d idle partitions not listed: held by their desired owner, no pending job; --all lists them)\n", hidden)
	}
	fmt.Fprintln(w)
	if err := printOutbox(w, g.Outbox, all); err != nil {
		return err
	}
	if err := printRunningWorkers(w, g); err != nil {
		return err
	}
	if err := printLimits(w, g.Limits, true, "leasehold jobs limited --group "+g.Group); err != nil {
		return err
	}
	if err := printWaits(w, g.Waits); err != nil {
		return err
	}
	if len(g.Members) == 0 {
		fmt.Fprintln(w, "no members")
		return nil
	}
	t = newTable(w, "MEMBER", "INCARNATION", "LIVE", "PARTITIONS", "LAST HEARTBEAT")
	for _, m := range g.Members {
		live := "yes"
		if !m.Live {
			live = "no"
		}
		t.row(m.ID, m.Incarnation, live, len(m.Partitions), human(time.Duration(m.HeartbeatAgeMS)*time.Millisecond)+" ago")
	}
	return t.flush()
}

// outboxListed is how many partitions the outbox section lists without
// --all: those whose oldest segment is the oldest.
const outboxListed = 10

// printOutbox writes the section of what waits in a group's outbox, if
// anything does, followed by a blank line; with all, every partition with
// segments waiting is listed.
func printOutbox(w io.Writer, o *admin.OutboxStatus, all bool) error {
	if o == nil || o.Segments == 0 {
		return nil
	}
	fmt.Fprintf(w, "outbox: %d segments (%s records) waiting to be published to Kafka; oldest %s\n",
		o.Segments, records(o.Records, o.RecordsPartial), human(time.Duration(o.OldestAgeMS)*time.Millisecond))
	ps := o.Partitions
	if !all && len(ps) > outboxListed {
		ps = slices.Clone(ps)
		slices.SortStableFunc(ps, func(a, b admin.OutboxPartition) int { return cmp.Compare(b.OldestAgeMS, a.OldestAgeMS) })
		ps = ps[:outboxListed]
		slices.SortFunc(ps, func(a, b admin.OutboxPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	}
	t := newTable(w, "PARTITION", "SEGMENTS", "RECORDS", "OLDEST", "OWNER", "TOKEN")
	for _, p := range ps {
		owner, token := "-", "-"
		if p.Owner != "" {
			owner, token = p.Owner, fmt.Sprint(p.Token)
			if !p.Held {
				owner += " (lease not held)"
			}
		}
		t.row(p.Partition, p.Segments, records(p.Records, p.RecordsPartial),
			human(time.Duration(p.OldestAgeMS)*time.Millisecond), owner, token)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if n := len(o.Partitions) - len(ps); n > 0 {
		fmt.Fprintf(w, "(the %d partitions with the oldest segments; %d more have segments waiting; --all lists them)\n", len(ps), n)
	}
	fmt.Fprintln(w)
	return nil
}

// printLimits writes the sections of a group's limits, if any, each
// followed by a blank line: the limits its kinds declare (if declared is
// set and some kind declares more than the default), then the keys held
// back by them, if any is; more says how to list more keys.
func printLimits(w io.Writer, l *admin.LimitsStatus, declared bool, more string) error {
	if l == nil {
		return nil
	}
	if declared && len(l.Declared) > 0 {
		fmt.Fprintln(w, "limits declared (by the kinds' handlers, as the workers recorded them):")
		t := newTable(w, "KIND", "KEY CONCURRENCY", "KEY RATE", "GROUP CONCURRENCY")
		for _, d := range l.Declared {
			rate, group := "-", "-"
			if d.KeyRatePerMS > 0 {
				rate = fmt.Sprintf("%d per %s", d.KeyRateStarts, time.Duration(d.KeyRatePerMS)*time.Millisecond)
			}
			if d.GroupConcurrency > 0 {
				group = strconv.Itoa(d.GroupConcurrency)
			}
			t.row(d.Kind, d.KeyConcurrency, rate, group)
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	total := l.Total()
	if total == 0 {
		return nil
	}
	atLeast := ""
	if l.Partial {
		atLeast = "at least "
	}
	by := make([]string, len(l.Totals))
	for i, t := range l.Totals {
		by[i] = fmt.Sprintf("%s %d", t.Limit, t.Waiting)
	}
	fmt.Fprintf(w, "held back by limits: %s%d jobs (%s)\n", atLeast, total, strings.Join(by, ", "))
	t := newTable(w, "KEY", "KIND", "LIMIT", "WAITING", "PARTITION", "OWNER")
	var keys int64
	for _, k := range l.Keys {
		t.row(fmt.Sprintf("%q", k.Key), k.Kind, k.Limit, k.Waiting, k.Partition, k.Owner)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, t := range l.Totals {
		keys += t.Keys
	}
	if n := keys - int64(len(l.Keys)); n > 0 {
		fmt.Fprintf(w, "(the %d keys with the most jobs waiting, of %s%d; %s lists more)\n", len(l.Keys), atLeast, keys, more)
	}
	fmt.Fprintln(w)
	return nil
}

// records formats a count of outbox records: "1000+" for a lower bound.
func records(n int64, partial bool) string {
	if partial {
		return strconv.FormatInt(n, 10) + "+"
	}
	return strconv.FormatInt(n, 10)
}

// printRunningWorkers writes the section of the jobs running now, by
// worker, if any run, followed by a blank line.
func printRunningWorkers(w io.Writer, g admin.GroupStatus) error {
	if g.Running == 0 {
		return nil
	}
	fmt.Fprintf(w, "running now: %d jobs\n", g.Running)
	t := newTable(w, "WORKER", "RUNNING", "PARTITIONS", "LONGEST")
	for _, r := range g.Workers {
		parts := make([]string, len(r.Partitions))
		for i, p := range r.Partitions {
			parts[i] = strconv.Itoa(p)
		}
		t.row(r.Worker, r.Running, strings.Join(parts, ","), "since "+r.Since.Format(time.RFC3339))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return nil
}

// printWaits writes the section of a group's waiting keys, if it has any,
// followed by a blank line.
func printWaits(w io.Writer, waits []admin.WaitStatus) error {
	if len(waits) == 0 {
		return nil
	}
	fmt.Fprintln(w, "keys waiting behind a job:")
	t := newTable(w, "PARTITION", "KEY", "JOB", "DUE IN", "ATTEMPTS", "WAITING")
	for _, ws := range waits {
		why := "scheduled"
		if ws.Attempt > 0 {
			why = "retrying"
		}
		t.row(ws.Partition, fmt.Sprintf("%q", ws.Key), ws.JobID, human(time.Duration(ws.DueInMS)*time.Millisecond),
			fmt.Sprintf("%d (%s)", ws.Attempt, why), ws.Waiting)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(waits) == admin.WaitsLimit {
		fmt.Fprintf(w, "(the %d most held up keys; others may wait too)\n", admin.WaitsLimit)
	}
	fmt.Fprintln(w)
	return nil
}
