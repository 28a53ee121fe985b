package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/logtest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/uiserve"
)

// waitOutput waits until the output matches re, and returns the match's
// first group; it fails the test after within, or when the command ended.
func waitOutput(t *testing.T, out *logtest.Buffer, re *regexp.Regexp, exited <-chan int, within time.Duration) string {
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
	out := &logtest.Buffer{}
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

// --allow-actions offers the actions: the job page has the cancel form,
// and posting it (with the page's cookie and csrf field, as a browser
// does) cancels the job, redirects back to the page, and is logged on
// stderr with the action, the job and the result.
func TestUIAllowActions(t *testing.T) {
	t.Parallel()
	dbURL, pool := adminDB(t)
	ids := enqueueN(t, dbURL, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &logtest.Buffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, []string{"ui", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--allow-actions"},
			strings.NewReader(""), out, out)
	}()
	base := waitOutput(t, out, servingURL, exited, time.Minute)
	page := base + "jobs/" + strconv.FormatInt(ids[0], 10)
	resp, err := http.Get(page)
	pgtest.Must(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	pgtest.Must(t, err)
	body := string(b)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="cancel-form"`) {
		t.Fatalf("GET jobs/%d with --allow-actions: %d, without form#cancel-form:\n%s", ids[0], resp.StatusCode, body)
	}
	tok := regexp.MustCompile(`id="cancel-form"><input type="hidden" name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if tok == nil {
		t.Fatalf("form#cancel-form has no csrf field:\n%s", body)
	}
	form := url.Values{"id": {strconv.FormatInt(ids[0], 10)}, "csrf": {tok[1]}, "return": {"/jobs/" + strconv.FormatInt(ids[0], 10)}}
	req, err := http.NewRequest(http.MethodPost, base+"actions/cancel", strings.NewReader(form.Encode()))
	pgtest.Must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Do(req)
	pgtest.Must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/jobs/"+strconv.FormatInt(ids[0], 10) {
		t.Errorf("POST actions/cancel: %d to %q; want 303 back to the job", res.StatusCode, res.Header.Get("Location"))
	}
	var state string
	pgtest.Must(t, pool.QueryRow(context.Background(), `SELECT state FROM leasehold.jobs WHERE id = $1`, ids[0]).Scan(&state))
	if state != "cancelled" {
		t.Errorf("job %d is %s after the cancel; want cancelled", ids[0], state)
	}
	logged := regexp.MustCompile(`msg="ui: action".*ids="?\[` + strconv.FormatInt(ids[0], 10) + `\]"?.*action=cancel.*result="cancelled job ` + strconv.FormatInt(ids[0], 10) + `"`)
	if !logged.MatchString(out.String()) {
		t.Errorf("the cancel is not logged on stderr:\n%s", out)
	}
	// Without the token, the same post is refused, and logged as such.
	req, err = http.NewRequest(http.MethodPost, base+"actions/cancel", strings.NewReader(url.Values{"id": {"1"}}.Encode()))
	pgtest.Must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err = noFollow.Do(req)
	pgtest.Must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(out.String(), `msg="ui: action refused"`) {
		t.Errorf("POST actions/cancel without the token: %d; want 403, logged", res.StatusCode)
	}
	cancel()
	<-exited
}

// DNS rebinding: ui on a loopback address answers 421 to a request naming
// another host (a page and an action alike), and serves the names given by
// --allowed-host.
func TestUIRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	dbURL, _ := adminDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &logtest.Buffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- execute(ctx, []string{"ui", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--allow-actions",
			"--allowed-host", "queue.example.com"}, strings.NewReader(""), out, out)
	}()
	base := waitOutput(t, out, servingURL, exited, time.Minute)
	u, err := url.Parse(base)
	pgtest.Must(t, err)
	for host, want := range map[string]int{
		"evil.example:" + u.Port(): http.StatusMisdirectedRequest,
		"localhost:" + u.Port():    http.StatusOK,
		"queue.example.com":        http.StatusOK,
	} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			path := ""
			if m == http.MethodPost {
				path = "actions/cancel"
			}
			req, err := http.NewRequest(m, base+path, nil)
			pgtest.Must(t, err)
			req.Host = host
			res, err := http.DefaultClient.Do(req)
			pgtest.Must(t, err)
			res.Body.Close()
			if m == http.MethodGet && res.StatusCode != want || m == http.MethodPost && want == http.StatusMisdirectedRequest && res.StatusCode != want {
				t.Errorf("%s / with Host %s: %d; want %d", m, host, res.StatusCode, want)
			}
		}
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

// --secure-cookies marks the UI's cookies Secure over plain http (a TLS
// proxy in front that says nothing of it); without it they are Secure only
// when a proxy says the request came over https (X-Forwarded-Proto), and
// "--secure-cookies=never" never. Another value is a usage error.
func TestUISecureCookies(t *testing.T) {
	t.Parallel()
	dbURL, _ := adminDB(t)
	csrfSecure := func(flags []string, hd http.Header) bool {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &logtest.Buffer{}
		exited := make(chan int, 1)
		go func() {
			args := append([]string{"ui", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--allow-actions"}, flags...)
			exited <- execute(ctx, args, strings.NewReader(""), out, out)
		}()
		base := waitOutput(t, out, servingURL, exited, time.Minute)
		defer func() {
			cancel()
			<-exited
		}()
		req, err := http.NewRequest(http.MethodGet, base, nil)
		pgtest.Must(t, err)
		for k, vs := range hd {
			req.Header[k] = vs
		}
		res, err := http.DefaultClient.Do(req)
		pgtest.Must(t, err)
		res.Body.Close()
		for _, c := range res.Cookies() {
			if c.Name == "leasehold_csrf" {
				return c.Secure
			}
		}
		t.Fatalf("ui %v: no CSRF cookie: %v", flags, res.Cookies())
		return false
	}
	proxied := http.Header{"X-Forwarded-Proto": {"https"}}
	for _, c := range []struct {
		flags []string
		hd    http.Header
		want  bool
	}{
		{nil, nil, false},
		{nil, proxied, true},
		{[]string{"--secure-cookies"}, nil, true},
		{[]string{"--secure-cookies=always"}, nil, true},
		{[]string{"--secure-cookies=never"}, proxied, false},
	} {
		if got := csrfSecure(c.flags, c.hd); got != c.want {
			t.Errorf("ui %v, request headers %v: the CSRF cookie's Secure = %v; want %v", c.flags, c.hd, got, c.want)
		}
	}
	_, err := runIn(t, "", "ui", "--database-url", dbURL, "--addr", "127.0.0.1:0", "--secure-cookies=sometimes")
	if err == nil || !strings.Contains(errorLine(err), `--secure-cookies "sometimes": want auto, always or never`) {
		t.Errorf("ui --secure-cookies=sometimes: %v; want a usage error", err)
	}
}
