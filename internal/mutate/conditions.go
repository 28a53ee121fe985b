package main

// Condition is one safety condition: the exact text in File that states
// it (From, found exactly once), what it becomes without the condition
// (To), and the tests of package Pkg that must fail without it.
type Condition struct {
	Name  string
	File  string
	From  string
	To    string
	Pkg   string
	Tests []string
}

// The fenced completion's lease condition in queueCompleteFenced, shared
// by the plain handlers' standalone completion and the transactional
// handlers' commit.
const completeLease = "      AND j.batch_item IS NULL\n      AND EXISTS (SELECT FROM l WHERE l.name = o.lease AND l.token = o.token AND l.live)"

// Conditions are the safety conditions of the audit (issue 27), each with
// the tests that catch its removal.
var Conditions = []Condition{{
	Name:  "completion: lease live",
	File:  "internal/store/queue.go",
	From:  completeLease,
	To:    "      AND j.batch_item IS NULL\n      AND EXISTS (SELECT FROM l WHERE l.name = o.lease AND l.token = o.token)",
	Pkg:   "./queue/",
	Tests: []string{"TestPlainCompletionUnderAnExpiredGrantIsRefused", "TestFlushFencesEachPartition"},
}, {
	Name: "completion: token (plain and transactional)",
	File: "internal/store/queue.go",
	From: completeLease,
	To:   "      AND j.batch_item IS NULL\n      AND EXISTS (SELECT FROM l WHERE l.name = o.lease AND l.live)",
	Pkg:  "./queue/",
	Tests: []string{"TestStaleOwnersPlainCompletionIsFenced", "TestStaleOwnerIsFenced", "TestFlushFencesEachPartition",
		"TestPlainCompletionUnderAnExpiredGrantIsRefused"},
}, {
	Name:  "fence check (lease.Fence): token",
	File:  "lease/fence.go",
	From:  "\tcase fence.Token(current) != token:\n",
	To:    "\tcase false:\n",
	Pkg:   "./lease/",
	Tests: []string{"TestFenceTxCommitsOnlyWhileTheLeaseCarriesTheToken", "TestFenceTxRollsBackAnEffectWhoseLeaseWasTakenOverWhileFnRan", "TestFencedErrorNamesTheLockingCheck"},
}, {
	Name:  "fence check (lease.Fence): live",
	File:  "lease/fence.go",
	From:  "\tcase !live:\n",
	To:    "\tcase false:\n",
	Pkg:   "./lease/",
	Tests: []string{"TestFenceTxCommitsOnlyWhileTheLeaseCarriesTheToken", "TestFencedErrorNamesTheLockingCheck", "TestFencedErrorNamesTheEarlyRead"},
}, {
	Name:  "kafka offset advance: token",
	File:  "internal/store/kafka.go",
	From:  "AND next_offset = $6::bigint AND token <= $5\n",
	To:    "AND next_offset = $6::bigint\n",
	Pkg:   "./kafka/",
	Tests: []string{"TestAdvanceIsConditional"},
}, {
	Name:  "background renewal: expiry",
	File:  "internal/store/lease.go",
	From:  "        WHERE m.owner = $3 AND m.expires_at > clock_timestamp()\n        FOR NO KEY UPDATE OF m SKIP LOCKED",
	To:    "        WHERE m.owner = $3\n        FOR NO KEY UPDATE OF m SKIP LOCKED",
	Pkg:   "./lease/",
	Tests: []string{"TestBackgroundRenewalDoesNotReviveAnExpiredGrant"},
}, {
	Name:  "Lease.Renew: expiry",
	File:  "internal/store/lease.go",
	From:  "    WHERE m.owner = $3 AND m.expires_at > clock_timestamp()\n    ORDER BY m.name",
	To:    "    WHERE m.owner = $3\n    ORDER BY m.name",
	Pkg:   "./lease/",
	Tests: []string{"TestRenewalDoesNotReviveAnExpiredGrant"},
}, {
	Name:  "fetch: per-key order",
	File:  "internal/store/queue.go",
	From:  "AND e.id <> ALL(r.held) AND (e.holds OR e.run_at <= c.now)",
	To:    "AND e.id <> ALL(r.held) AND (e.run_at <= c.now)",
	Pkg:   "./queue/",
	Tests: []string{"TestOutcomesAndOrderUnderRetries", "TestDueJobsRunInRunAtThenIDOrder", "TestTransactionalJobsApplyOnceInKeyOrder"},
}, {
	Name:  "acquire: held lease not taken",
	File:  "internal/store/lease.go",
	From:  "WHERE l.expires_at <= clock_timestamp() OR l.owner = EXCLUDED.owner\n",
	To:    "WHERE true\n",
	Pkg:   "./lease/",
	Tests: []string{"TestTryAcquireHeldReleaseAndTokenOrder", "TestAcquireWaitsForReleaseAndHonoursContext"},
}, {
	Name:  "acquire: token strictly increases",
	File:  "internal/store/lease.go",
	From:  "    token       = nextval('{{schema}}.lease_token_seq'),\n",
	To:    "    token       = l.token,\n",
	Pkg:   "./lease/",
	Tests: []string{"TestTryAcquireHeldReleaseAndTokenOrder", "TestSameOwnerRetrySupersedesWithNewToken", "TestAcquireWaitingForTheRowGetsALaterToken"},
}, {
	Name:  "token guard: sequence raised past stored tokens",
	File:  "internal/store/tokens.go",
	From:  "\tif issued >= stored {\n\t\treturn nil, nil\n\t}\n\ttx, err := db.Begin(ctx)",
	To:    "\tif true {\n\t\treturn nil, nil\n\t}\n\ttx, err := db.Begin(ctx)",
	Pkg:   "./lease/",
	Tests: []string{"TestFirstGrantIsAboveEveryStoredTokenAfterTheSequenceWasReset", "TestGuardTokensMovesPastAFencedTablesTokens"},
}, {
	Name:  "release: by token",
	File:  "internal/store/lease.go",
	From:  "WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > c.t`",
	To:    "WHERE name = $1 AND owner = $2 AND expires_at > c.t`",
	Pkg:   "./lease/",
	Tests: []string{"TestStaleReleaseBySameOwnerKeepsNewerGrant"},
}, {
	Name:  "FencedError.Check: early read named",
	File:  "lease/fence.go",
	From:  "f.verify(ctx, tx, f.peek, fence.CheckEarly,",
	To:    "f.verify(ctx, tx, f.peek, fence.CheckLocking,",
	Pkg:   "./lease/",
	Tests: []string{"TestFencedErrorNamesTheEarlyRead"},
}, {
	Name:  "outbox: progress in the Kafka transaction",
	File:  "kafka/relay_producer.go",
	From:  "\tif err := p.commitProgress(ctx, last, lastScope); err != nil {\n",
	To:    "\tif err := error(nil); err != nil {\n",
	Pkg:   "./kafka/",
	Tests: []string{"TestRelayResumesFromTheProgressCommittedInKafka", "TestRelayRefusesProgressAheadOfTheOutbox"},
}, {
	Name:  "outbox: sealed in the handler's transaction",
	File:  "queue/tx.go",
	From:  "\tif box.Added() > 0 {\n",
	To:    "\tif false {\n",
	Pkg:   "./outbox/",
	Tests: []string{"TestRecordsCommitWithTheJobAsOneSegment", "TestRecordsOfARolledBackSavepointAreDropped", "TestRecordsRollBackWithAFailedHandler"},
}, {
	Name:  "outbox: only published segments deleted",
	File:  "internal/store/outbox.go",
	From:  "      AND seq <= least($3, (SELECT min(seq)",
	To:    "      AND seq <= least($3 + 1, (SELECT min(seq)",
	Pkg:   "./kafka/",
	Tests: []string{"TestRelayPublishesWholeSegments", "TestRelayResumesFromTheProgressCommittedInKafka"},
}, {
	Name:  "key limit: a job waits while its key's limit runs",
	File:  "queue/pipeline.go",
	From:  "\t\tif ln.active() >= limit {\n",
	To:    "\t\tif ln.active() >= limit+1 {\n",
	Pkg:   "./queue/",
	Tests: []string{"TestKeyConcurrencyHoldsAcrossHandoffs", "TestKeyLimitOfOneRunsAlone"},
}, {
	Name:  "key rate: at most Starts in a window",
	File:  "queue/limits.go",
	From:  "\tif len(ts) < r.Starts {\n",
	To:    "\tif len(ts) < r.Starts+1 {\n",
	Pkg:   "./queue/",
	Tests: []string{"TestKeyRateHoldsAcrossHandoffs"},
}, {
	Name:  "key rate: a period's wait after an abrupt end",
	File:  "queue/limits.go",
	From:  "\t\tif until := rs.abrupt.Add(r.Per); now.Before(until) {\n",
	To:    "\t\tif until := rs.abrupt; now.Before(until) {\n",
	Pkg:   "./queue/",
	Tests: []string{"TestKeyRateHoldsAcrossHandoffs"},
}, {
	Name:  "key rate: handed over at a graceful handoff",
	File:  "queue/recover.go",
	From:  "\t\tif err := rs.take(a.rate, a.since, time.Now()); err != nil {\n",
	To:    "\t\tif err := rs.take(nil, a.since, time.Now()); err != nil {\n",
	Pkg:   "./queue/",
	Tests: []string{"TestKeyRateHoldsAcrossHandoffs"},
}, {
	Name:  "group concurrency: a slot runs one job",
	File:  "queue/groupslots.go",
	From:  "\t\tsp.free = sp.free[:len(sp.free)-1]\n",
	To:    "\t\t_ = 0\n",
	Pkg:   "./queue/",
	Tests: []string{"TestGroupSlotsHistoryHoldsTheLimit"},
}}
