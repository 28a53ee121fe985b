package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/uiserve"
)

// syncBuffer is a bytes.Buffer written by a command running in another
// goroutine while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitOutput waits until the output matches re, and returns the match's
// first group; it fails the test after within, or when the command ended.
func waitOutput(t *testing.T, out *syncBuffer, re *regexp.Regexp, exited <-chan int, within time.Duration) string {
	t.Helper()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-exited:
			t.Fatalf("the command exited (%d) before printing %s:\n%s", code, re, out)
		default:
		}
		if time.Since(start) > within {
			t.Fatalf("no %s after %v:\n%s", re, within, out)
		}
	}
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	pgtest.Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	pgtest.Must(t, err)
	return resp.StatusCode, string(b)
}

var servingURL = regexp.MustCompile(`serving (http://\S+/),`)

// `leasehold ui` serves the UI on the database until interrupted: the
// overview lists the group; it is read-only by default (an action posted
// is refused and changes nothing); an interrupt stops it cleanly, exit
// status 0.
func TestUI(t *testing.T) {
	t.Parallel()
	dbURL, pool := adminDB(t)
	ids := enqueueN(t, dbURL, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, []string{"ui", "--database-url", dbURL, "--addr", "127.0.0.1:0"}, strings.NewReader(""), out, out)
	}()
	base := waitOutput(t, out, servingURL, exited, time.Minute)
	if !strings.Contains(out.String(), "read-only") {
		t.Errorf("the start line does not say the UI is read-only: %s", out)
	}

	code, body := get(t, base)
	if code != http.StatusOK || !strings.Contains(body, `data-group="g"`) {
		t.Errorf("GET %s: %d, without a row for group g:\n%s", base, code, body)
	}
	resp, err := http.PostForm(base+"actions/cancel", url.Values{"id": {"1"}})
	pgtest.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST actions/cancel on the read-only UI: %d, want 404 or 403", resp.StatusCode)
	}
	var state string
	pgtest.Must(t, pool.QueryRow(context.Background(), `SELECT state FROM leasehold.jobs WHERE id = $1`, ids[0]).Scan(&state))
	if state != "pending" {
		t.Errorf("job %d is %s after a refused cancel", ids[0], state)
	}

	cancel() // as SIGINT does: main's context
	select {
	case code := <-exited:
		if code != 0 || !strings.Contains(out.String(), "leasehold ui: stopped") {
			t.Errorf("after the interrupt: exit %d, output:\n%s", code, out)
		}
	case <-time.After(time.Minute):
		t.Fatal("ui did not stop after the interrupt")
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after ui stopped", addr)
	}
}

// --allow-actions offers the actions: the job page has the cancel form.
func TestUIAllowActions(t *testing.T) {
	t.Parallel()
	dbURL, _ := adminDB(t)
	ids := enqueueN(t, dbURL, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, []string{"ui", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--allow-actions"},
			strings.NewReader(""), out, out)
	}()
	base := waitOutput(t, out, servingURL, exited, time.Minute)
	code, body := get(t, base+"jobs/"+strconv.FormatInt(ids[0], 10))
	if code != http.StatusOK || !strings.Contains(body, `id="cancel-form"`) {
		t.Errorf("GET jobs/%d with --allow-actions: %d, without form#cancel-form:\n%s", ids[0], code, body)
	}
	cancel()
	<-exited
}

// An address in use is a clear error, naming --addr, before any serving.
func TestUIAddrInUse(t *testing.T) {
	t.Parallel()
	dbURL, _ := adminDB(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	pgtest.Must(t, err)
	defer l.Close()
	_, err = runIn(t, "", "ui", "--database-url", dbURL, "--addr", l.Addr().String())
	if !errors.Is(err, uiserve.ErrAddrInUse) || !strings.Contains(errorLine(err), "--addr "+l.Addr().String()+": address already in use") {
		t.Errorf("ui on an address in use: %v", err)
	}
}
