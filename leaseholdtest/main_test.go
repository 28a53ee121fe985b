package leaseholdtest_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leaseholdtest"
)

func TestMain(m *testing.M) { os.Exit(leaseholdtest.Run(m)) }

// recTB is a testing.TB whose failures are recorded, not reported: to
// check that an assertion fails when it should, and what it says. Its
// Fatalf ends the goroutine, as testing.T's does.
type recTB struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recTB) Helper() {}

func (r *recTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recTB) Fatal(args ...any) { r.Fatalf("%s", args...) }

func (r *recTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// failure runs f with a recording TB in a goroutine of its own and returns
// the failure messages it recorded, joined ("" if it passed).
func failure(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &recTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// mustFail checks that f fails, with a message containing every one of
// wants.
func mustFail(t *testing.T, f func(tb testing.TB), wants ...string) {
	t.Helper()
	msg := failure(t, f)
	if msg == "" {
		t.Fatalf("the assertion passed; want it to fail")
	}
	for _, w := range wants {
		if !strings.Contains(msg, w) {
			t.Errorf("the failure message lacks %q:\n%s", w, msg)
		}
	}
}

// mustPass checks that f passes.
func mustPass(t *testing.T, f func(tb testing.TB)) {
	t.Helper()
	if msg := failure(t, f); msg != "" {
		t.Fatalf("the assertion failed: %s", msg)
	}
}

func context2m(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
