package store

// The statements of what operators are shown of the fenced outbox
// (`leasehold status`, the web UI's group page; see migration 0017).

// OutboxInsightSQL are the statements that report a group's outbox.
type OutboxInsightSQL struct {
	// Waiting reads what waits to be published, per partition.
	Waiting string
}

// outboxWaiting returns, for each partition of group $1 that ever sealed an
// outbox segment (it has a row in outbox_heads), in partition order:
// partition, the sequence number of its last segment (next_seq - 1), the
// sequence number and commit time of its oldest segment left (NULLs when
// none is), how many of its oldest segments, at most $2, were counted and
// the records they hold, and the database's clock.
//
// Its cost does not follow the backlog: a partition's segments are numbered
// without gaps in commit order and deleted oldest first (outboxDelete), so
// those left are the ones from the oldest to the last, and their count is
// the difference of two sequence numbers, read by primary key (one probe
// for the oldest). Records are counted only over the oldest $2 segments
// (segments record how many records they hold): a partition with more
// waiting reports a lower bound. So the statement reads at most $2 + 1
// segments per partition, however far behind the relay is.
const outboxWaiting = `
SELECT h.partition, h.next_seq - 1, s.seq, s.committed_at,
       coalesce(c.segments, 0), coalesce(c.records, 0), clock_timestamp()
FROM {{schema}}.outbox_heads AS h
LEFT JOIN LATERAL (
    SELECT o.seq, o.committed_at FROM {{schema}}.outbox_segments AS o
    WHERE o.group_name = h.group_name AND o.partition = h.partition
    ORDER BY o.seq LIMIT 1) AS s ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS segments, sum(f.records) AS records FROM (
        SELECT o.records FROM {{schema}}.outbox_segments AS o
        WHERE o.group_name = h.group_name AND o.partition = h.partition
        ORDER BY o.seq LIMIT $2) AS f) AS c ON true
WHERE h.group_name = $1
ORDER BY h.partition`
