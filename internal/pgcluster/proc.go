package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The helpers below are shared with package pgbouncer: both start a server
// process as the "postgres" user on a free loopback port and wait until it
// answers.

// ErrExited is returned by AwaitReady when the process exited first.
var ErrExited = errors.New("the process exited during start-up")

// ServerCredential returns the credential to run a server process with:
// the "postgres" user's when running as root (PostgreSQL and PgBouncer
// refuse to run as root), nil otherwise.
func ServerCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs a \"postgres\" user to run the server as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// FreePort returns a loopback TCP port free now (another process may take
// it before it is bound: retry on a failed start).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail returns the last 2,000 bytes of the log file at path.
func Tail(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

// AwaitReady calls ready every poll until it returns nil, and returns nil
// then; ErrExited once exited is closed, ctx's error once ctx ends, and
// an error when within passes first.
func AwaitReady(ctx context.Context, exited <-chan struct{}, within, poll time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(within)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		err := ready(rctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %w", within, err)
		}
	}
}
