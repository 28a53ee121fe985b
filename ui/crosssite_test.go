package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/ui"
)

// In Chromium: a link to the UI followed from another site (a page on
// localhost linking to the UI on 127.0.0.1: another site) leaves the CSRF
// cookie as it was, so a form loaded earlier in another tab still posts.
// With the cookie SameSite=Strict the browser did not send it with that
// navigation, the UI minted a new token over it, and the earlier tab's
// cancel was refused with 403.
func TestBrowserCrossSiteLinkKeepsForms(t *testing.T) {
	t.Parallel()
	browser := startBrowser(t)
	e := newEnv(t, ui.Config{})
	h, err := ui.New(e.db, ui.Config{AllowActions: true, Refresh: -1})
	pgtest.Must(t, err)
	srv := httptest.NewServer(h) // on 127.0.0.1
	t.Cleanup(srv.Close)
	id := e.enqueue(queue.Job{Args: note{Text: "x"}, RunAt: time.Now().Add(time.Hour)})

	// The other site: a page on localhost linking to the UI.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<!doctype html><title>chat</title><a id="go" href="`+srv.URL+`/groups/emails">the queue</a>`)
	}))
	t.Cleanup(other.Close)
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)

	old := newTab(t, browser)
	old.open(fmt.Sprintf("%s/jobs/%d", srv.URL, id))
	if old.count("#cancel") != 1 {
		t.Fatal("no #cancel on the pending job's page")
	}
	chat := newTab(t, browser)
	chat.open(otherURL)
	if code := chat.click("#go"); code != http.StatusOK {
		t.Fatalf("the link from the other site: status %d", code)
	}
	if site := eval[string](chat, `location.host`); site != strings.TrimPrefix(srv.URL, "http://") {
		t.Fatalf("the link led to %s", site)
	}

	if code := old.click("#cancel"); code != http.StatusOK {
		t.Fatalf("the earlier tab's cancel after a cross-site link: status %d (%s)", code, old.text("#error-message"))
	}
	if s := e.state(id); s != queue.StateCancelled {
		t.Errorf("job %d is %s; want cancelled", id, s)
	}
}
