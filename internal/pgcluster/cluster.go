package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotInstalled is returned when no PostgreSQL server binaries can be found.
var ErrNotInstalled = errors.New("pgcluster: PostgreSQL server binaries (initdb, postgres) not found on PATH " +
	"or under /usr/lib/postgresql/*/bin: install them (Debian/Ubuntu: apt-get install postgresql) " +
	"or point LEASEHOLD_TEST_DATABASE_URL / DATABASE_URL at an existing server")

// Config configures a throwaway cluster.
type Config struct {
	// BinDir is the directory holding initdb and postgres. Defaults to the
	// directory of initdb on PATH, else the newest /usr/lib/postgresql/*/bin.
	BinDir string
	// Settings are extra server settings passed as -c name=value. They
	// override the defaults (fsync off, up to 300 connections).
	Settings map[string]string
	// Durable keeps fsync and synchronous_commit on (for benchmarks that
	// should pay for durability). Defaults to false: a throwaway cluster.
	Durable bool
}

// Cluster is a running throwaway PostgreSQL cluster on a loopback port.
type Cluster struct {
	bin  string
	dir  string // parent directory, removed by Remove
	data string
	port int
	cred *syscall.Credential
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// FindBinDir returns the directory holding the PostgreSQL server binaries.
func FindBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start creates a new cluster in a temporary directory and starts it. When
// running as root, the server runs as the "postgres" user, since PostgreSQL
// refuses to run as root.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	bin := cfg.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{bin: bin}
	cred, err := ServerCredential()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c.cred = cred
	dir, err := os.MkdirTemp("", "leasehold-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c.dir, c.data = dir, filepath.Join(dir, "data")
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			c.Remove()
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	c.prepare(initdb)
	if out, err := initdb.CombinedOutput(); err != nil {
		c.Remove()
		return nil, fmt.Errorf("pgcluster: initdb: %w: %s", err, out)
	}
	settings := map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": c.dir,
		"max_connections":         "300",
		"shared_buffers":          "128MB",
		"fsync":                   "off",
		"synchronous_commit":      "off",
		"full_page_writes":        "off",
		"log_min_messages":        "warning",
		"logging_collector":       "off",
	}
	if cfg.Durable {
		delete(settings, "fsync")
		delete(settings, "synchronous_commit")
		delete(settings, "full_page_writes")
	}
	for k, v := range cfg.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.args = append(c.args, "-c", k+"="+settings[k])
	}
	var lastErr error
	for range 3 { // a free port can be taken between picking and binding it
		if c.port, err = FreePort(); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		if lastErr = c.start(ctx); lastErr == nil {
			return c, nil
		}
	}
	c.Remove()
	return nil, lastErr
}

func (c *Cluster) prepare(cmd *exec.Cmd) {
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	cmd.Dir = c.dir
}

// start launches the server on c.port and waits until it accepts connections.
func (c *Cluster) start(ctx context.Context) error {
	args := append([]string{"-D", c.data, "-p", strconv.Itoa(c.port)}, c.args...)
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), args...)
	c.prepare(cmd)
	logf, err := os.OpenFile(filepath.Join(c.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()

	err = AwaitReady(ctx, exited, 60*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		conn, err := pgconn.Connect(ctx, c.URL("postgres"))
		if err == nil {
			conn.Close(ctx)
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrExited):
		return fmt.Errorf("pgcluster: postgres exited during start-up: %s", Tail(filepath.Join(c.dir, "server.log")))
	case ctx.Err() != nil:
		c.Stop()
		return err
	}
	c.Stop()
	return fmt.Errorf("pgcluster: postgres did not accept connections: %w: %s", err, Tail(filepath.Join(c.dir, "server.log")))
}

// Port returns the loopback port the cluster listens on.
func (c *Cluster) Port() int { return c.port }

// URL returns a connection URL for database dbname as the superuser "postgres".
func (c *Cluster) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, dbname)
}

// Stop shuts the server down (fast shutdown) and keeps its data, so that
// Restart can bring it back on the same port.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	return nil
}

// Restart starts a stopped cluster again on the same port.
func (c *Cluster) Restart(ctx context.Context) error {
	c.Stop()
	return c.start(ctx)
}

// Remove stops the server and deletes its files.
func (c *Cluster) Remove() error {
	c.Stop()
	if c.dir == "" {
		return nil
	}
	return os.RemoveAll(c.dir)
}
