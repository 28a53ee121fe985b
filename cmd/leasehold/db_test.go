package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/admin"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// silentServer accepts connections and never answers: a database host that
// is up but blackholed. It returns its address.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	pgtest.Must(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

var adminCommands = [][]string{
	{"status"},
	{"enqueue", "--group", "g", "--kind", "k"},
	{"jobs", "show", "1"},
	{"jobs", "list", "--group", "g"},
	{"jobs", "retry", "1"},
	{"jobs", "cancel", "1"},
	{"batch", "submit", "g", "b"},
	{"batch", "status", "b"},
	{"batch", "list"},
	{"batch", "seal", "b"},
	{"batch", "cancel", "g", "b"},
	{"batch", "retry", "b"},
	{"ui", "--addr", "127.0.0.1:0"}, // it checks the database before it serves
}

// A database that never answers, or refuses connections, gives a clear
// error once --connect-timeout has passed: the commands do not hang.
func TestDeadDatabase(t *testing.T) {
	t.Parallel()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	pgtest.Must(t, err)
	refusedAddr := refused.Addr().String()
	refused.Close()
	for name, addr := range map[string]string{"silent": silentServer(t), "refused": refusedAddr} {
		url := fmt.Sprintf("postgres://u:secret@%s/db?sslmode=disable", addr)
		for _, args := range adminCommands {
			done := make(chan error, 1)
			go func() {
				_, err := runIn(t, "", append(args, "--database-url", url, "--connect-timeout", "300ms")...)
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, admin.ErrUnreachable) || !strings.Contains(err.Error(), "--connect-timeout") {
					t.Errorf("%s database, %v: %v; want admin.ErrUnreachable", name, args, err)
				}
				if err != nil && strings.Contains(err.Error(), "secret") {
					t.Errorf("the error shows the password: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s database, %v: no answer after 30s despite --connect-timeout 300ms", name, args)
			}
		}
	}
}

func TestNoDatabaseURL(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	for _, args := range adminCommands {
		if _, err := runIn(t, "", args...); !errors.Is(err, admin.ErrNoDatabase) {
			t.Errorf("%v without a URL: %v; want admin.ErrNoDatabase", args, err)
		}
	}
}

// DATABASE_URL is used when --database-url is not given.
func TestDatabaseURLFromEnv(t *testing.T) {
	url, _ := adminDB(t)
	t.Setenv("DATABASE_URL", url)
	var rep admin.Status
	pgtest.Must(t, runJSON(t, &rep, "", "status"))
	if len(rep.Groups) != 1 || rep.Groups[0].Group != "g" {
		t.Fatalf("status with DATABASE_URL: %+v", rep)
	}
}

// Database work stuck behind a lock ends at --timeout with an error that
// says so: here a cancel waits for an owner's completion in flight (a
// transaction holding the job's row), which never commits.
func TestTimeout(t *testing.T) {
	t.Parallel()
	url, pool := adminDB(t)
	ids := enqueueN(t, url, 1)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	pgtest.Must(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT FROM leasehold.jobs WHERE id = $1 FOR UPDATE`, ids[0])
	pgtest.Must(t, err)
	_, err = runIn(t, "", "jobs", "cancel", fmt.Sprint(ids[0]), "--database-url", url, "--timeout", "500ms")
	if err == nil || !strings.Contains(err.Error(), "--timeout") {
		t.Fatalf("cancel behind a lock: %v; want a --timeout error", err)
	}
	pgtest.Must(t, tx.Rollback(ctx))
	var state string
	pgtest.Must(t, pool.QueryRow(ctx, `SELECT state FROM leasehold.jobs WHERE id = $1`, ids[0]).Scan(&state))
	if state != "pending" {
		t.Fatalf("job %s after a cancel that timed out; want pending", state)
	}
}
