package partition

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/internal/store"
)

// NotifyChannel returns the LISTEN/NOTIFY channel of the partition groups in
// schema ("" for the default): "leasehold_partitions_" and 16 hex digits of
// XXH64 of the schema name, short enough for any schema name. The payload
// of a notification of a membership change (a join, a leave) is the
// group's name; that of a release is the group's name, a newline and the
// partitions released, as ascending numbers and ranges separated by commas
// ("g\n3,17-19").
func NotifyChannel(schema string) string { return store.PartitionChannel(schema) }

// Why releases say which partitions they free: a join makes a release at
// each member that gives the joiner a partition (16 at 64 members x 1,024
// partitions), and each release's notification, carrying the group's name
// alone, woke every member of the fleet for a read of the membership that
// only the member waiting for the partition needed: 64 members started one
// after the other read it 12,691 times. Now only a member whose last
// assignment wants one of the partitions reads.

// maxReleasePayload bounds a release's payload (PostgreSQL refuses
// payloads of 8,000 bytes or more); a longer list is sent as the group's
// name alone, which wakes every member.
const maxReleasePayload = 7000

// releasePayload returns the payload of a notification of group's
// partitions parts.
func releasePayload(group string, parts []int) string {
	parts = slices.Clone(parts)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	var b strings.Builder
	b.WriteString(group)
	b.WriteByte('\n')
	for i := 0; i < len(parts); {
		j := i
		for j+1 < len(parts) && parts[j+1] == parts[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(parts[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(parts[j]))
		}
		i = j + 1
	}
	if b.Len() > maxReleasePayload || len(parts) == 0 {
		return group
	}
	return b.String()
}

// releasedParts parses payload as a release of group's partitions: ok is
// false when it is not one (another group's notification, or the group's
// name alone). A list it cannot parse is reported as nil parts with ok
// true: its reader should read the membership, as for the name alone.
func releasedParts(payload, group string) (parts [][2]int, ok bool) {
	rest, found := strings.CutPrefix(payload, group+"\n")
	if !found {
		return nil, false
	}
	for r := range strings.SplitSeq(rest, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, true
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, true
			}
		}
		parts = append(parts, [2]int{a, b})
	}
	return parts, true
}

// notified decides whether a notification on the partition channel wakes
// this member for a read of the membership: its group's membership changed,
// or partitions its last assignment wants were released (or a release it
// cannot parse).
func (m *Member) notified(payload string) bool {
	if payload == m.cfg.Group {
		return true
	}
	ranges, ok := releasedParts(payload, m.cfg.Group)
	if !ok {
		return false
	}
	owners := m.wanted.Load()
	if ranges == nil || owners == nil {
		return true
	}
	for _, r := range ranges {
		for p := r[0]; p <= min(r[1], len(*owners)-1); p++ {
			if (*owners)[p] == m.cfg.ID {
				return true
			}
		}
	}
	return false
}

// notifyReleased wakes the members of the group that want parts, just
// released.
func (m *Member) notifyReleased(ctx context.Context, parts []int) {
	if _, err := m.pool.Exec(ctx, m.q.Notify, m.q.Channel, releasePayload(m.cfg.Group, parts)); err != nil {
		m.log.Debug("partition: notify failed; members will poll", "err", err)
	}
}
