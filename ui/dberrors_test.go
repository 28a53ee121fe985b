package ui_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// errorIDPattern is the error id a page shows for a database failure.
var errorIDPattern = regexp.MustCompile(`\(error ([0-9a-f]{10}): the UI's log has the details\)`)

// logLine returns the log record whose error_id is id, nil if none.
func logLine(t *testing.T, log *logtest.Buffer, id string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["error_id"] == id {
			return rec
		}
	}
	return nil
}

// checkHidden fails the test if page r shows any of secrets, or if its
// message msg has no error id found in the log with path and level.
func checkHidden(t *testing.T, log *logtest.Buffer, what string, r response, msg, path, level string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(r.Body, s) {
			t.Errorf("%s: the page shows %q: %s", what, s, msg)
		}
	}
	m := errorIDPattern.FindStringSubmatch(msg)
	if m == nil {
		t.Errorf("%s: message %q has no error id", what, msg)
		return
	}
	rec := logLine(t, log, m[1])
	if rec == nil {
		t.Errorf("%s: error id %s is in no log line:\n%s", what, m[1], log.String())
		return
	}
	if rec["level"] != level || rec["path"] != path || rec["err"] == nil || rec["err"] == "" {
		t.Errorf("%s: the log line of error %s: %v; want level %s, path %s and the error", what, m[1], rec, level, path)
	}
}

// A UI whose database is unreachable answers 503 with a short message and
// an error id, not the driver's error, which names the database's user,
// host, port and database name; the log has the error under that id, at
// error level with the request's path, for the operator. The actions'
// 503s alike.
func TestDatabaseErrorsAreNotShown(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	var cfg *pgxpool.Config
	pool, proxy := pgtest.ProxiedPool(t, pgtest.MigratedURL(t), func(c *pgxpool.Config) {
		c.ConnConfig.ConnectTimeout = 5 * time.Second
		cfg = c
	})
	db := pgtest.DBOn(t, pool)
	q, err := queue.New(db, queue.Config{})
	pgtest.Must(t, err)
	_, err = q.EnsureGroup(ctx, "emails", 4)
	pgtest.Must(t, err)
	res, err := q.Enqueue(ctx, queue.Job{Group: "emails", Args: note{Text: "x"}})
	pgtest.Must(t, err)
	log := &logtest.Buffer{}
	h, err := ui.New(db, ui.Config{AllowActions: true, Logger: slog.New(slog.NewJSONHandler(log, nil))})
	pgtest.Must(t, err)
	e := &env{t: t, h: h, log: log}
	b := e.browser()
	groupPage := b.get("/groups/emails")
	if groupPage.StatusCode != http.StatusOK {
		t.Fatalf("GET /groups/emails with the database up = %d", groupPage.StatusCode)
	}

	proxy.Cut() // the database is unreachable: connections refused
	pool.Reset()
	addr := fmt.Sprintf("127.0.0.1:%d", proxy.Port())
	secrets := []string{cfg.ConnConfig.Database, "user=", "database=", cfg.ConnConfig.User, addr,
		"failed to connect", "dial", "EOF"}
	r := e.get("/")
	// The negative control: the log has the driver's error, details and all.
	if r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(log.String(), cfg.ConnConfig.Database) {
		t.Fatalf("GET / with the database unreachable = %d; want 503 and the error logged:\n%s", r.StatusCode, log.String())
	}
	for _, p := range []string{"/", "/groups/emails", "/jobs?group=emails", "/jobs/" + itoa(res.ID), "/batches", "/batches/1"} {
		r := e.get(p)
		if r.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET %s with the database unreachable = %d; want 503", p, r.StatusCode)
		}
		checkHidden(t, log, "GET "+p, r, text(byID(r.Doc, "error-message")), strings.SplitN(p, "?", 2)[0], "ERROR", secrets)
	}
	got := b.submit(groupPage, "pause-form", url.Values{})
	if got.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("pause with the database unreachable = %d; want 503", got.StatusCode)
	}
	checkHidden(t, log, "pause", got, text(byID(got.Doc, "error-message")), "/actions/pause", "ERROR", secrets)
}

// The parts of a page read apart (the overview's throughput, a group's
// events, the jobs list) show a failed read by its error id too, not the
// database's error text (here: a table that is gone).
func TestPartialDatabaseErrorsAreNotShown(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	e := newEnv(t, ui.Config{})
	e.enqueue(queue.Job{Args: note{Text: "x"}})
	for _, stmt := range []string{
		"ALTER TABLE leasehold.job_stats RENAME TO job_stats_secret_gone",
		"ALTER TABLE leasehold.events RENAME TO events_secret_gone",
	} {
		_, err := e.pool.Exec(ctx, stmt)
		pgtest.Must(t, err)
	}
	secrets := []string{"does not exist", "job_stats", "leasehold.events", "42P01", "relation"}

	r := e.page("/")
	caption := all(r.Doc, func(n *nodeT) bool { return n.Data == "figcaption" })
	if len(caption) == 0 {
		t.Fatalf("the overview has no throughput chart:\n%s", r.Body)
	}
	checkHidden(t, e.log, "the overview's throughput", r, text(caption[0]), "/", "ERROR", secrets)

	r = e.page("/groups/emails")
	events := all(r.Doc, func(n *nodeT) bool { return hasClass(n, "error") })
	if len(events) != 1 {
		t.Fatalf("the group page shows %d errors; want the events' error", len(events))
	}
	checkHidden(t, e.log, "the group's events", r, text(events[0]), "/groups/emails", "ERROR", secrets)

	_, err := e.pool.Exec(ctx, "ALTER TABLE leasehold.jobs RENAME TO jobs_secret_gone")
	pgtest.Must(t, err)
	r = e.get("/jobs?group=emails")
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /jobs?group=emails with its table gone = %d; want 503", r.StatusCode)
	}
	checkHidden(t, e.log, "the jobs list", r, text(byID(r.Doc, "jobs-error")), "/jobs", "ERROR", append(secrets, "jobs_secret_gone"))
}
