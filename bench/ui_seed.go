package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/partition"
	"github.com/leasehold/leasehold/queue"
)

// uiGroup is one partition group of the ui suite's data.
type uiGroup struct {
	name       string
	partitions int
	share      int // per 10,000 of the plain jobs
	workers    int // members of the fleet (0: nobody owns the group's partitions)
}

// uiGroups are the suite's groups: a large group, a small one, and one
// whose workers are gone (every partition unowned, its backlog growing),
// which the UI must show standing out.
var uiGroups = []uiGroup{
	{name: "emails", partitions: 256, share: 7000, workers: 3},
	{name: "reports", partitions: 16, share: 2500, workers: 2},
	{name: "imports", partitions: 64, share: 500, workers: 0},
}

// uiPausedKind is paused in every group with workers, since a while: its
// due jobs are the groups' due backlog, which the fleet does not drain, so
// that the backlog the pages count stays about the same during the run.
const uiPausedKind = "email.digest"

// uiPausedFor is the share of --span since uiPausedKind was paused: its
// jobs created meanwhile are pending and due.
const uiPausedFor = 0.3

// uiRecent is the share of --span (the newest jobs) in which other jobs
// are still pending: scheduled for later or waiting for a retry.
const uiRecent = 0.1

// uiRareKind is the kind of about 1 in 10,000 plain jobs.
const uiRareKind = "account.purge"

// uiItemKind is the kind of batch items.
const uiItemKind = "import.row"

// uiErrors are the error texts recorded on failed attempts. One holds
// markup, as an error quoting an HTTP body would.
var uiErrors = []string{
	"smtp: 421 4.7.0 mx.example.net: too many connections from your IP, try again later",
	`webhook: POST https://hooks.example.com/acme/orders: 503 Service Unavailable: "<html><body><h1>upstream overloaded</h1></body></html>"`,
	"context deadline exceeded (job timeout 1m0s)",
	"render: template \"invoice-v7\": executing \"body\" at <.Customer.VAT>: map has no entry for key \"VAT\"",
	"dial tcp 10.0.3.17:443: connect: connection refused",
	"push: APNs 410 Unregistered: the device token is no longer active",
}

// uiBatchSpec is one seeded batch: items items of which done and failed
// (per 1000) were completed and discarded before the run, the rest due.
type uiBatchSpec struct {
	group, name, description string
	per                      int // items: --jobs / per
	done, failed             int // per 1000
	end                      string
}

// The batches' ends: sealed (and finishing as the fleet completes the
// rest), cancelled, or left open (a producer still adding).
const (
	batchSealed    = "sealed"
	batchCancelled = "cancelled"
	batchOpen      = "open"
)

// uiBatches are the suite's batches. The first is the big one (100,000
// items of 1,000,000 jobs), burning down while the pages are measured.
var uiBatches = []uiBatchSpec{
	{group: "reports", name: "customers-import-2026-12", description: "customers.csv from the CRM export", per: 10, done: 600, failed: 10, end: batchSealed},
	{group: "reports", name: "invoices-2026-11", description: "November's invoices", per: 500, done: 990, failed: 10, end: batchSealed},
	{group: "emails", name: "welcome-wave-48", description: "week 48 sign-ups", per: 200, done: 500, failed: 5, end: batchSealed},
	{group: "emails", name: "winback-campaign", description: "cancelled by marketing", per: 1000, done: 300, failed: 0, end: batchCancelled},
	{group: "reports", name: "open-upload", description: "still uploading", per: 1000, done: 800, failed: 0, end: batchOpen},
}

// seeded is what seeding made, for the pages and the report.
type seeded struct {
	batches map[string]int64 // batch name -> id
	items   int              // batch items in all
	shape   uiShape
}

// hu returns SQL for a uniform hash of the bigint expression n in
// 0..mod-1, one stream per salt (the run's --seed mixed in).
func (b *uiBench) hu(n string, salt, mod int) string {
	return fmt.Sprintf("((hashint8extended(%s, %d) & 2147483647) %% %d)", n, b.f.seed*1000+int64(salt), mod)
}

// kindCase returns SQL choosing a plain job's kind from u, uniform in
// 0..9999, with the frequencies of uiKinds.
func kindCase(u string) string {
	var s strings.Builder
	s.WriteString("CASE")
	for _, k := range uiKinds {
		if k.upTo > 0 {
			fmt.Fprintf(&s, " WHEN %s < %d THEN '%s'", u, k.upTo, k.name)
		}
	}
	s.WriteString(" END")
	return s.String()
}

// seed fills the tables: the groups, the keys' partitions, the plain jobs
// in chunks of 100,000 (INSERT ... SELECT generate_series), the batches
// (created and sealed or cancelled through the queue API, their items and
// counters written by SQL consistent with what the API would have
// written), the pauses; then VACUUM ANALYZE and a CHECKPOINT.
func (b *uiBench) seed(ctx context.Context) (seeded, error) {
	out := seeded{batches: map[string]int64{}}
	for _, g := range uiGroups {
		if _, err := b.app.EnsureGroup(ctx, g.name, g.partitions); err != nil {
			return out, err
		}
	}
	t0 := time.Now()
	if err := b.seedKeys(ctx); err != nil {
		return out, fmt.Errorf("keys: %w", err)
	}
	for _, s := range uiBatches {
		out.items += max(b.f.jobs/s.per, 1)
	}
	plain := b.f.jobs - out.items
	now := time.Now()
	const chunk = 100_000
	for lo := 1; lo <= plain; lo += chunk {
		hi := min(lo+chunk-1, plain)
		if _, err := b.ctl.Exec(ctx, b.plainSQL(), lo, hi, plain, b.f.span.Seconds(), b.f.keys, now); err != nil {
			return out, fmt.Errorf("insert jobs %d..%d: %w", lo, hi, err)
		}
		fmt.Fprintf(b.stderr, "  seeded %d of %d plain jobs (%v)\n", hi, plain, time.Since(t0).Round(time.Second))
	}
	if _, err := b.ctl.Exec(ctx, "DROP TABLE bench_ui_keys"); err != nil {
		return out, err
	}
	for i, s := range uiBatches {
		id, err := b.seedBatch(ctx, i, s, now)
		if err != nil {
			return out, fmt.Errorf("batch %s: %w", s.name, err)
		}
		out.batches[s.name] = id
	}
	for _, g := range uiGroups {
		if g.workers == 0 {
			continue
		}
		if err := b.app.Pause(ctx, g.name, uiPausedKind, "provider rate limit: resume after the backlog review"); err != nil {
			return out, err
		}
	}
	t := b.tables
	pausedAt := now.Add(-time.Duration(uiPausedFor * float64(b.f.span)))
	if _, err := b.ctl.Exec(ctx, "UPDATE "+t.pauses+" SET paused_at = $1, paused_by = 'ops@example.com'", pausedAt); err != nil {
		return out, err
	}
	// Historical jobs carry tokens 1..901: the fleet's grants come after.
	if _, err := b.ctl.Exec(ctx, "SELECT setval($1, 1000)", t.schema+".lease_token_seq"); err != nil {
		return out, err
	}
	fmt.Fprintf(b.stderr, "  seeded %d jobs in %v; VACUUM ANALYZE\n", b.f.jobs, time.Since(t0).Round(time.Second))
	if _, err := b.ctl.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return out, err
	}
	if err := checkpoint(ctx, b.ctl); err != nil {
		return out, err
	}
	var err error
	out.shape, err = b.readShape(ctx)
	return out, err
}

// seedKeys writes table bench_ui_keys: each key's partition in every
// group, computed with partition.OfString as the Client does.
func (b *uiBench) seedKeys(ctx context.Context) error {
	if _, err := b.ctl.Exec(ctx, `CREATE TABLE bench_ui_keys (k int PRIMARY KEY, key text NOT NULL,
		p0 int NOT NULL, p1 int NOT NULL, p2 int NOT NULL)`); err != nil {
		return err
	}
	rows := make([][]any, b.f.keys)
	for k := range rows {
		key := uiKey(k)
		row := []any{int32(k), key}
		for _, g := range uiGroups {
			row = append(row, int32(partition.OfString(key, g.partitions)))
		}
		rows[k] = row
	}
	_, err := b.ctl.CopyFrom(ctx, pgx.Identifier{"bench_ui_keys"}, []string{"k", "key", "p0", "p1", "p2"}, pgx.CopyFromRows(rows))
	return err
}

// uiKey is the key of key number k.
func uiKey(k int) string { return "acct-" + strconv.Itoa(k) }

// plainSQL inserts plain jobs $1..$2 of $3 (job n was created ($3-n)/$3 of
// span $4 seconds before $6), keyed over $5 keys with a skew (key k is
// chosen with probability ~ 1/sqrt(k)), 20% keyless. See the ui suite in
// README.md for the shape.
func (b *uiBench) plainSQL() string {
	t := b.tables
	h := b.hu
	msgs := make([]string, len(uiErrors))
	for i, m := range uiErrors {
		msgs[i] = "'" + strings.ReplaceAll(m, "'", "''") + "'"
	}
	return `
INSERT INTO ` + t.jobs + ` (group_name, partition, key, kind, args, state, attempt, max_attempts, max_attempts_set,
    priority, run_at, created_at, finished_at, finished_token, errors)
SELECT g.name,
       CASE WHEN x.keyless THEN (x.n % g.parts)::int WHEN x.gi = 0 THEN k.p0 WHEN x.gi = 1 THEN k.p1 ELSE k.p2 END,
       CASE WHEN x.keyless THEN '' ELSE k.key END,
       x.kind,
       jsonb_build_object('account', x.ki, 'to', 'user' || x.ki || '@example.com',
           'template', (ARRAY['welcome-v3', 'receipt-v12', 'password-reset', 'weekly-digest', 'invoice-v7'])[1 + ` + h("x.n", 12, 5) + `],
           'locale', (ARRAY['en-GB', 'de-DE', 'fr-FR', 'nl-NL'])[1 + ` + h("x.n", 13, 4) + `],
           'request_id', md5(x.n::text), 'tags', jsonb_build_array('tier-' || ` + h("x.n", 14, 4) + `, 'eu-west-1'),
           'source', 'api/v2/jobs'),
       s.state, s.attempt, x.maxatt, true,
       CASE WHEN ` + h("x.n", 11, 100) + ` < 90 THEN 1 ELSE 2 + ` + h("x.n", 11, 3) + ` END,
       s.run_at, x.created, s.finished_at, s.token,
       CASE WHEN s.nerr = 0 THEN '[]'::jsonb ELSE (
           SELECT jsonb_agg(jsonb_build_object(
                      'attempt', CASE WHEN c.sub = 'cancelled' THEN s.attempt ELSE e END,
                      'at', x.created + e * interval '41 seconds',
                      'error', CASE WHEN c.sub = 'cancelled' THEN 'cancelled by an operator'
                                    ELSE (ARRAY[` + strings.Join(msgs, ", ") + `])[1 + (x.n + e) % ` + strconv.Itoa(len(msgs)) + `] END)
                  ORDER BY e)
           FROM generate_series(1, s.nerr) AS e) END
FROM (
    SELECT n,
           CASE WHEN ` + h("n", 1, 10000) + ` < ` + strconv.Itoa(uiGroups[0].share) + ` THEN 0
                WHEN ` + h("n", 1, 10000) + ` < ` + strconv.Itoa(uiGroups[0].share+uiGroups[1].share) + ` THEN 1 ELSE 2 END AS gi,
           ` + kindCase(h("n", 2, 10000)) + ` AS kind,
           ` + h("n", 3, 10) + ` < 2 AS keyless,
           least(floor($5::int * power(` + h("n", 4, 1000003) + ` / 1000003.0, 2))::int, $5::int - 1) AS ki,
           ($3::bigint - n)::float8 / $3::bigint AS age,
           $6::timestamptz - ($4::float8 * ($3::bigint - n) / $3::bigint) * interval '1 second' AS created
    FROM generate_series($1::bigint, $2::bigint) AS n
) AS x0
CROSS JOIN LATERAL (SELECT x0.*, CASE WHEN x0.kind = 'webhook.deliver' THEN 8 ELSE 5 END AS maxatt) AS x
JOIN (VALUES ` + b.groupValues() + `) AS g (gi, name, parts) ON g.gi = x.gi
JOIN bench_ui_keys AS k ON k.k = x.ki
CROSS JOIN LATERAL (SELECT CASE
    WHEN x.kind = '` + uiPausedKind + `' AND x.gi < 2 AND x.age < ` + fmt.Sprint(uiPausedFor) + ` THEN 'due'
    WHEN x.age < ` + fmt.Sprint(uiRecent) + ` AND ` + h("x.n", 5, 10000) + ` < 4000 THEN
        CASE WHEN ` + h("x.n", 6, 10) + ` < 6 THEN 'scheduled' WHEN ` + h("x.n", 6, 10) + ` < 8 THEN 'retrying'
             WHEN x.gi = 2 THEN 'due' ELSE 'scheduled' END
    WHEN ` + h("x.n", 7, 10000) + ` < 230 THEN 'discarded'
    WHEN ` + h("x.n", 7, 10000) + ` < 350 THEN 'cancelled'
    WHEN ` + h("x.n", 7, 10000) + ` < 1000 THEN 'completed2'
    ELSE 'completed' END AS sub) AS c
CROSS JOIN LATERAL (SELECT
    CASE WHEN c.sub IN ('due', 'scheduled', 'retrying') THEN 'pending' WHEN c.sub = 'completed2' THEN 'completed' ELSE c.sub END AS state,
    CASE c.sub WHEN 'retrying' THEN 1 + ` + h("x.n", 9, 4) + ` WHEN 'discarded' THEN x.maxatt WHEN 'completed2' THEN 2
               WHEN 'completed' THEN 1 WHEN 'cancelled' THEN ` + h("x.n", 9, 2) + ` ELSE 0 END AS attempt,
    CASE c.sub WHEN 'retrying' THEN 1 + ` + h("x.n", 9, 4) + ` WHEN 'discarded' THEN x.maxatt WHEN 'completed2' THEN 1
               WHEN 'cancelled' THEN 1 ELSE 0 END AS nerr,
    CASE c.sub WHEN 'scheduled' THEN $6::timestamptz + interval '1 hour' + ` + h("x.n", 8, 10000) + ` * interval '1 minute'
               WHEN 'retrying' THEN $6::timestamptz + interval '5 minutes' + ` + h("x.n", 8, 10000) + ` * interval '2 seconds'
               ELSE x.created END AS run_at,
    CASE WHEN c.sub IN ('due', 'scheduled', 'retrying') THEN NULL
         ELSE least(x.created + (1 + ` + h("x.n", 10, 120) + `) * interval '1 second', $6::timestamptz) END AS finished_at,
    CASE WHEN c.sub IN ('completed', 'completed2', 'discarded') THEN 1 + floor((1 - x.age) * 900)::bigint END AS token
) AS s`
}

// groupValues returns uiGroups as SQL VALUES rows (index, name, partitions).
func (b *uiBench) groupValues() string {
	var rows []string
	for i, g := range uiGroups {
		rows = append(rows, fmt.Sprintf("(%d, '%s', %d)", i, g.name, g.partitions))
	}
	return strings.Join(rows, ", ")
}

// seedBatch creates batch s (number i) with the queue API, inserts its
// items (keyless, created over the last tenth of --span, done and failed
// per 1000 finished, the rest due), writes its batch_totals and
// batch_counts rows from the items as the API's statements would have,
// then seals or cancels it with the API (or leaves it open).
func (b *uiBench) seedBatch(ctx context.Context, i int, s uiBatchSpec, now time.Time) (int64, error) {
	info, err := b.app.CreateBatch(ctx, queue.BatchSpec{Group: s.group, Name: s.name, Description: s.description})
	if err != nil {
		return 0, err
	}
	var parts int
	for _, g := range uiGroups {
		if g.name == s.group {
			parts = g.partitions
		}
	}
	n := max(b.f.jobs/s.per, 1)
	t := b.tables
	h := b.hu
	u := h("i", 20+i, 1000)
	insert := `
INSERT INTO ` + t.jobs + ` (group_name, partition, key, kind, args, state, attempt, max_attempts, max_attempts_set,
    run_at, created_at, finished_at, finished_token, errors, batch_id, batch_item)
SELECT $2, (i % $3)::int, '', '` + uiItemKind + `',
       jsonb_build_object('row', i, 'file', 's3://imports/2026-12/' || $2 || '.csv', 'sha1', md5(i::text),
           'columns', jsonb_build_array('id', 'email', 'name', 'plan', 'created_at')),
       c.state, CASE c.state WHEN 'pending' THEN 0 WHEN 'discarded' THEN 5 ELSE 1 END, 5, true,
       c.created, c.created,
       CASE WHEN c.state <> 'pending' THEN least(c.created + interval '3 seconds', $7::timestamptz) END,
       CASE WHEN c.state <> 'pending' THEN 950 END,
       CASE WHEN c.state = 'discarded' THEN (
           SELECT jsonb_agg(jsonb_build_object('attempt', e, 'at', c.created + e * interval '2 seconds',
               'error', 'import: row ' || i || ': column "email": "<script>alert(1)</script>" is not an address') ORDER BY e)
           FROM generate_series(1, 5) AS e)
            ELSE '[]'::jsonb END,
       $1, 'row-' || i
FROM generate_series(0, $4::int - 1) AS i
CROSS JOIN LATERAL (SELECT
    CASE WHEN ` + u + ` < $5 THEN 'completed' WHEN ` + u + ` < $5 + $6 THEN 'discarded' ELSE 'pending' END AS state,
    $7::timestamptz - ($8::float8 * ($4::int - i) / $4::int) * interval '1 second' AS created) AS c`
	if _, err := b.ctl.Exec(ctx, insert, info.ID, s.group, parts, n, s.done, s.failed, now, b.f.span.Seconds()*uiRecent); err != nil {
		return 0, err
	}
	if _, err := b.ctl.Exec(ctx, `INSERT INTO `+t.totals+` (batch_id, partition, total)
		SELECT batch_id, partition, count(*) FROM `+t.jobs+` WHERE batch_id = $1 AND batch_item IS NOT NULL GROUP BY 1, 2`, info.ID); err != nil {
		return 0, err
	}
	if _, err := b.ctl.Exec(ctx, `INSERT INTO `+t.counts+` (batch_id, partition, completed, failed, cancelled)
		SELECT batch_id, partition, count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'discarded'),
		       count(*) FILTER (WHERE state = 'cancelled')
		FROM `+t.jobs+` WHERE batch_id = $1 AND batch_item IS NOT NULL GROUP BY 1, 2`, info.ID); err != nil {
		return 0, err
	}
	switch s.end {
	case batchSealed:
		_, err = b.app.SealBatch(ctx, s.group, s.name)
	case batchCancelled:
		_, err = b.app.CancelBatch(ctx, s.group, s.name)
	}
	return info.ID, err
}

// uiShape is the seeded data's shape, as the database counts it.
type uiShape struct {
	Jobs       int64 `json:"jobs"`
	Completed  int64 `json:"completed"`
	Discarded  int64 `json:"discarded"`
	Cancelled  int64 `json:"cancelled"`
	Pending    int64 `json:"pending"`
	Due        int64 `json:"pending_due"`
	Retrying   int64 `json:"pending_retrying"`
	WithErrors int64 `json:"with_errors"`
	Keyless    int64 `json:"keyless"`
	Items      int64 `json:"batch_items"`
	RareKind   int64 `json:"rare_kind"`
	TableMB    int64 `json:"table_mib"`
}

// readShape counts the seeded jobs.
func (b *uiBench) readShape(ctx context.Context) (uiShape, error) {
	var s uiShape
	err := b.ctl.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
		count(*) FILTER (WHERE state = 'discarded'), count(*) FILTER (WHERE state = 'cancelled'),
		count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'pending' AND run_at <= now()),
		count(*) FILTER (WHERE state = 'pending' AND attempt > 0), count(*) FILTER (WHERE errors <> '[]'),
		count(*) FILTER (WHERE key = ''), count(*) FILTER (WHERE batch_item IS NOT NULL),
		count(*) FILTER (WHERE kind = $1), pg_total_relation_size($2::regclass) >> 20
		FROM `+b.tables.jobs, uiRareKind, b.tables.jobs).Scan(&s.Jobs, &s.Completed, &s.Discarded, &s.Cancelled,
		&s.Pending, &s.Due, &s.Retrying, &s.WithErrors, &s.Keyless, &s.Items, &s.RareKind, &s.TableMB)
	return s, err
}

// String describes the shape in one sentence, for the report.
func (s uiShape) String() string {
	pct := func(x int64) string { return fmt.Sprintf("%.1f%%", 100*float64(x)/float64(max(s.Jobs, 1))) }
	return fmt.Sprintf("%d jobs (%d MiB with indexes): %s completed, %s discarded, %s cancelled, %s pending "+
		"(%d due, %d retrying, the rest scheduled later); %d with errors recorded, %s keyless, %d batch items, %d of the rare kind",
		s.Jobs, s.TableMB, pct(s.Completed), pct(s.Discarded), pct(s.Cancelled), pct(s.Pending), s.Due, s.Retrying,
		s.WithErrors, pct(s.Keyless), s.Items, s.RareKind)
}

// checkBatchCounts checks that every batch's counters (batch_totals,
// batch_counts) agree with its items in the jobs table, as the queue's
// statements keep them: seeding writes them itself, so a mistake there
// would make the batch pages show what no real run could.
func (b *uiBench) checkBatchCounts(ctx context.Context) error {
	t := b.tables
	var bad int
	var example string
	err := b.ctl.QueryRow(ctx, `
WITH j AS (
    SELECT batch_id, partition, count(*) AS total, count(*) FILTER (WHERE state = 'completed') AS completed,
           count(*) FILTER (WHERE state = 'discarded') AS failed, count(*) FILTER (WHERE state = 'cancelled') AS cancelled
    FROM `+t.jobs+` WHERE batch_item IS NOT NULL GROUP BY 1, 2),
c AS (
    SELECT t.batch_id, t.partition, t.total, coalesce(c.completed, 0) AS completed, coalesce(c.failed, 0) AS failed,
           coalesce(c.cancelled, 0) AS cancelled
    FROM `+t.totals+` AS t LEFT JOIN `+t.counts+` AS c USING (batch_id, partition)),
d AS (
    SELECT coalesce(j.batch_id, c.batch_id) AS batch_id, coalesce(j.partition, c.partition) AS partition
    FROM j FULL JOIN c USING (batch_id, partition)
    WHERE j IS DISTINCT FROM c)
SELECT count(*), coalesce(min(batch_id || '/' || partition), '') FROM d`).Scan(&bad, &example)
	if err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d batch partitions' counters disagree with their items (first: batch/partition %s)", errCheck, bad, example)
	}
	return nil
}
