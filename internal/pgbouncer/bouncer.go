package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/internal/pgcluster"
)

// ErrNotInstalled is returned by Start when no pgbouncer binary is found.
var ErrNotInstalled = errors.New("pgbouncer: the pgbouncer binary is not on PATH or in /usr/sbin " +
	"(Debian/Ubuntu: apt-get install pgbouncer)")

// Config configures a pooler.
type Config struct {
	// Server is the URL of the PostgreSQL server the pooler connects to;
	// its host, port, user and password are used (the database is the
	// client's). Required.
	Server string
	// Mode is the pool mode: "transaction" (the default), "session" or
	// "statement".
	Mode string
	// PoolSize is the number of server connections per database and user
	// (PgBouncer's default_pool_size). Defaults to 20.
	PoolSize int
}

// Bouncer is a running PgBouncer on a loopback port.
type Bouncer struct {
	dir  string
	port int
	cred *syscall.Credential
	bin  string
	cfg  Config

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start writes a configuration in a temporary directory and starts
// PgBouncer with it, waiting until it accepts connections. When running as
// root, PgBouncer runs as the "postgres" user (it refuses to run as root).
func Start(ctx context.Context, cfg Config) (*Bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			return nil, ErrNotInstalled
		}
		bin = "/usr/sbin/pgbouncer"
	}
	if cfg.Mode == "" {
		cfg.Mode = "transaction"
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 20
	}
	cc, err := pgconn.ParseConfig(cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: Server: %w", err)
	}
	b := &Bouncer{bin: bin, cfg: cfg}
	if b.cred, err = pgcluster.ServerCredential(); err != nil {
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	if b.dir, err = os.MkdirTemp("", "leasehold-pgbouncer-"); err != nil {
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	if b.cred != nil {
		if err := os.Chown(b.dir, int(b.cred.Uid), int(b.cred.Gid)); err != nil {
			b.Remove()
			return nil, fmt.Errorf("pgbouncer: %w", err)
		}
	}
	host := cc.Host
	if strings.HasPrefix(host, "/") || host == "localhost" {
		host = "127.0.0.1"
	}
	server := fmt.Sprintf("host=%s port=%d user=%s", host, cc.Port, quote(cc.User))
	if cc.Password != "" {
		server += " password=" + quote(cc.Password)
	}
	var lastErr error
	for range 3 { // a free port can be taken between picking and binding it
		if b.port, err = pgcluster.FreePort(); err != nil {
			b.Remove()
			return nil, fmt.Errorf("pgbouncer: %w", err)
		}
		ini := fmt.Sprintf(`[databases]
* = %s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = %s
max_client_conn = 5000
default_pool_size = %d
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
logfile = %s
`, server, b.port, cfg.Mode, cfg.PoolSize, filepath.Join(b.dir, "pgbouncer.log"))
		if err := os.WriteFile(filepath.Join(b.dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
			b.Remove()
			return nil, fmt.Errorf("pgbouncer: %w", err)
		}
		if lastErr = b.start(ctx); lastErr == nil {
			return b, nil
		}
	}
	b.Remove()
	return nil, lastErr
}

// quote quotes a value of a libpq connection string.
func quote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// start launches pgbouncer and waits until it accepts connections.
func (b *Bouncer) start(ctx context.Context) error {
	cmd := exec.Command(b.bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred, Pdeathsig: syscall.SIGTERM, Setpgid: true}
	cmd.Dir = b.dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgbouncer: start: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.mu.Lock()
	b.cmd, b.exited = cmd, exited
	b.mu.Unlock()
	err := pgcluster.AwaitReady(ctx, exited, 30*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", b.Addr())
		if err == nil {
			conn.Close()
		}
		return err
	})
	log := filepath.Join(b.dir, "pgbouncer.log")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgcluster.ErrExited):
		return fmt.Errorf("pgbouncer: exited during start-up: %s", pgcluster.Tail(log))
	}
	b.Stop()
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("pgbouncer: did not accept connections: %w: %s", err, pgcluster.Tail(log))
}

// Addr returns the pooler's host:port.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// URL returns a URL of database dbname through the pooler (which logs in
// to the server as the Server URL's user, whatever the client's).
func (b *Bouncer) URL(dbname string) string {
	u := url.URL{Scheme: "postgres", User: url.User("leasehold"), Host: b.Addr(), Path: "/" + dbname, RawQuery: "sslmode=disable"}
	return u.String()
}

// Stop shuts the pooler down (its client connections are closed).
func (b *Bouncer) Stop() error {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	return nil
}

// Remove stops the pooler and deletes its files.
func (b *Bouncer) Remove() error {
	b.Stop()
	if b.dir == "" {
		return nil
	}
	return os.RemoveAll(b.dir)
}
