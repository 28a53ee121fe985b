package store

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"
)

// DefaultSchema is the schema leasehold uses unless configured otherwise.
const DefaultSchema = "leasehold"

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Quote validates a schema name and returns it quoted for use in SQL. An
// empty name means DefaultSchema.
func Quote(name string) (quoted string, err error) {
	if name == "" {
		name = DefaultSchema
	}
	if !identRE.MatchString(name) {
		return "", fmt.Errorf("%w %q: use letters, digits and underscores, at most 63 bytes", ErrInvalidSchema, name)
	}
	return pgx.Identifier{name}.Sanitize(), nil
}

// Render replaces {{schema}} in sql with the quoted schema name.
func Render(sql, quotedSchema string) string {
	return strings.ReplaceAll(sql, "{{schema}}", quotedSchema)
}

// Statements are every statement of every component, rendered for one
// schema.
type Statements struct {
	// Schema is the schema's name, DefaultSchema when none was given.
	Schema    string
	Lease     LeaseSQL
	Partition PartitionSQL
	Queue     QueueSQL
	Batch     BatchSQL
	Pause     PauseSQL
	Kafka     KafkaSQL
	Outbox    OutboxSQL
	// OutboxInsight reports the outbox to operators.
	OutboxInsight OutboxInsightSQL
	Tokens        TokenSQL
	Running       RunningSQL
	Periodic      PeriodicSQL
	Insight       InsightSQL
}

var rendered sync.Map // schema name -> *Statements

// For returns the statements rendered for schema ("" means DefaultSchema).
// They are rendered once per schema and shared: do not modify them.
func For(schema string) (*Statements, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if s, ok := rendered.Load(schema); ok {
		return s.(*Statements), nil
	}
	q, err := Quote(schema)
	if err != nil {
		return nil, err
	}
	r := func(sql string) string { return Render(sql, q) }
	s := &Statements{
		Schema: schema,
		Lease: LeaseSQL{
			Acquire: r(leaseAcquire), AcquireMany: r(leaseAcquireMany), Renew: r(leaseRenew),
			RenewSkipLocked: r(leaseRenewSkipLocked), Release: r(leaseRelease), ReleaseMany: r(leaseReleaseMany),
			ReleaseOrphans: r(leaseReleaseOrphans), Inspect: r(leaseInspect),
			InspectMany: r(leaseInspectMany), DeleteExpired: r(leaseDeleteExpired),
			LockTable: r(leaseLockTable), Check: r(leaseCheck), Peek: r(leasePeek),
		},
		Partition: PartitionSQL{
			CreateGroup: r(partitionCreateGroup), GroupCount: r(partitionGroupCount),
			Heartbeat: r(partitionHeartbeat), Join: r(partitionJoin), Member: r(partitionMember), Leave: r(partitionLeave), View: r(partitionView),
			Status: r(partitionStatus), Members: r(partitionMembers), Groups: r(partitionGroups), Notify: partitionNotify,
			Channel: PartitionChannel(schema),
		},
		Queue: QueueSQL{
			CreateGroup: r(queueCreateGroup), Groups: r(queueGroups), Enqueue: r(queueEnqueue), EnqueuePlain: r(queueEnqueuePlain), EnqueueOne: r(queueEnqueueOne),
			Fetch: r(queueFetch), FetchWalk: r(queueFetchWalk), FetchBefore12: r(queueFetchBefore12), OpenRun: r(queueOpenRun),
			CloseRun: r(queueCloseRun), Complete: r(queueComplete), CompleteFenced: r(queueCompleteFenced), CompleteItems: r(queueCompleteItems),
			Retain: r(queueRetain), Poll: r(queuePoll), RetainItems: r(queueRetainItems), Inspect: r(queueInspect), Retry: r(queueRetry), Stats: r(queueStats),
			Cancel: r(queueCancel), List: r(queueList), Waits: r(queueWaits), ReleaseUnique: r(queueReleaseUnique),
			ByKind: r(queueByKind), PendingKinds: r(queuePendingKinds), Trace: r(queueTrace),
			Notify: queueNotify, Channel: QueueChannel(schema),
		},
		Batch: BatchSQL{
			Create: r(batchCreate), Spec: r(batchSpec), Kinds: r(batchKinds), RegisterKinds: r(batchRegisterKinds),
			LockAdd: r(batchLockAdd), LockName: r(batchLockName), Add: r(batchAdd), Conflicts: r(batchConflicts), ItemJobs: r(batchItemJobs),
			Deletable: r(batchDeletable), Delete: r(batchDelete), MarkGone: r(batchMarkGone), Retain: r(batchRetain), Seal: r(batchSeal),
			Cancel: r(batchCancel), CancelItems: r(batchCancelItems), RetryItems: r(batchRetryItems),
			Lock: r(batchLock), Finish: r(batchFinish), Progress: r(batchProgress), ByID: r(batchByID),
			Named: r(batchNamed), List: r(batchList),
		},
		Pause:   PauseSQL{Pause: r(pausePause), Resume: r(pauseResume), List: r(pauseList), Kinds: r(pauseKinds)},
		Tokens:  TokenSQL{Check: r(tokensCheck), Raise: r(tokensRaise)},
		Running: RunningSQL{Publish: r(runningPublish), Jobs: r(runningJobs), List: r(runningList), Limited: r(runningLimited)},
		Periodic: PeriodicSQL{
			Declare: r(periodicDeclare), Last: r(periodicLast), Insert: r(periodicInsert), SetJobs: r(periodicSetJobs),
			SetNext: r(periodicSetNext), Prune: r(periodicPrune), List: r(periodicList),
		},
		Insight: InsightSQL{
			PageWalk: r(insightPageWalk + pageRows(walkRest)), PageFailed: r(insightPageFailed),
			PageKey: r(insightPageKey),
			Record:  r(insightRecord), Prune: r(insightPrune), Throughput: r(insightThroughput), Events: r(insightEvents),
		},
		Kafka: KafkaSQL{Read: r(kafkaRead), Advance: r(kafkaAdvance), List: r(kafkaList), Topics: r(kafkaTopics)},
		Outbox: OutboxSQL{
			Append: r(outboxAppend), Seal: r(outboxSeal), Head: r(outboxHead), Refuse: r(outboxRefuse), Clear: r(outboxClear), Adopted: r(outboxAdopted), Read: r(outboxRead),
			ReadSegment: r(outboxReadSegment), At: r(outboxAt), Delete: r(outboxDelete),
		},
		OutboxInsight: OutboxInsightSQL{Waiting: r(outboxWaiting)},
	}
	v, _ := rendered.LoadOrStore(schema, s)
	return v.(*Statements), nil
}

// PartitionChannel returns the LISTEN/NOTIFY channel of the partition
// groups in schema ("" for the default): "leasehold_partitions_" and 16 hex
// digits of XXH64 of the schema name, short enough for any schema name.
func PartitionChannel(schema string) string { return channel("leasehold_partitions_", schema) }

// QueueChannel returns the LISTEN/NOTIFY channel of the enqueues in schema
// ("" for the default): "leasehold_jobs_" and 16 hex digits of XXH64 of the
// schema name.
func QueueChannel(schema string) string { return channel("leasehold_jobs_", schema) }

func channel(prefix, schema string) string {
	if schema == "" {
		schema = DefaultSchema
	}
	return fmt.Sprintf("%s%016x", prefix, xxhash.Sum64String(schema))
}

// LeaseSQL are the statements of package lease.
type LeaseSQL struct {
	Acquire, AcquireMany, Renew, Release, ReleaseOrphans, Inspect, InspectMany, DeleteExpired, LockTable string
	// ReleaseMany is Release for several grants of one owner.
	ReleaseMany string
	// RenewSkipLocked is the renewal loop's statement: Renew, skipping the
	// rows it cannot lock at once.
	RenewSkipLocked string
	// Check is the fence check of an effect transaction; Peek is the same
	// read without the lock.
	Check, Peek string
}

// PartitionSQL are the statements of package partition.
type PartitionSQL struct {
	CreateGroup, GroupCount, Member, View, Status, Members, Groups string
	// Heartbeat extends a membership, or (re)joins and wakes the group;
	// Join is Heartbeat for Start, which checks the partition count too;
	// Leave ends a membership and wakes the group.
	Heartbeat, Join, Leave string
	// Notify wakes the members of a group ($1 the channel, $2 the group).
	Notify string
	// Channel is the LISTEN/NOTIFY channel of membership changes; the
	// payload of each notification is the group's name.
	Channel string
}

// QueueSQL are the statements of package queue.
type QueueSQL struct {
	CreateGroup, Groups, Enqueue, EnqueuePlain, EnqueueOne, Fetch, FetchWalk, OpenRun, CloseRun, CompleteFenced, Retain, Inspect,
	Retry, Stats, Cancel, List, Waits, ReleaseUnique string
	// Poll finds which of a member's partitions have due jobs.
	Poll string
	// Notify sends the notifications of enqueues no statement of their
	// own notified (a Client's coalesced ones).
	Notify string
	// CompleteItems is CompleteFenced for outcomes of batch items;
	// RetainItems is Retain for the items of finished batches.
	CompleteItems, RetainItems string
	// FetchBefore12 and Complete are not run by the queue: they are the
	// baselines of tests and benchmarks.
	FetchBefore12, Complete string
	// ByKind, PendingKinds and Trace are run only by the test helpers
	// (leaseholdtest's assertions and inline runs).
	ByKind, PendingKinds, Trace string
	// Channel is the LISTEN/NOTIFY channel of new jobs.
	Channel string
}

// BatchSQL are the statements of batches (package queue).
type BatchSQL struct {
	Create, Spec, Kinds, RegisterKinds, LockAdd, LockName, Add, Conflicts, ItemJobs, Seal, Cancel, CancelItems, RetryItems,
	Lock, Finish, Progress, ByID, Named, List string
	// Deletable and Delete delete a finished batch; MarkGone and Retain
	// are the retention of finished batches.
	Deletable, Delete, MarkGone, Retain string
}

// RunningSQL are the statements of what is running now (package queue).
type RunningSQL struct {
	// Publish writes changed running sets and returns the cancelled jobs
	// among those running; Jobs lists a group's running jobs; List is
	// QueueSQL.List for running jobs; Limited reads a group's keys held
	// back by limits and the limits its kinds declare.
	Publish, Jobs, List, Limited string
}

// TokenSQL are the statements of the token regression guard (GuardTokens).
type TokenSQL struct {
	Check, Raise string
}

// KafkaSQL are the statements of package kafka.
type KafkaSQL struct {
	Read, Advance, List string
	// Topics records a group's topic list on first use and returns the
	// recorded one.
	Topics string
}
