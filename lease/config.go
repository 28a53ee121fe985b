package lease

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
	"unicode/utf8"
)

// MinTTL is the shortest lease TTL a Client accepts.
const MinTTL = time.Second

// DefaultTTL is the lease TTL of a Config that sets none.
const DefaultTTL = 15 * time.Second

// MaxNameLen is the longest lease name or owner id, in bytes.
const MaxNameLen = 255

// Config configures a Client. The zero value of every field means its
// default.
type Config struct {
	// Owner identifies this Client as a holder. It must be unique among all
	// Clients using the same leases: two Clients with one owner id take
	// leases from each other. Defaults to "<hostname>-<pid>-<random hex>".
	Owner string
	// TTL is how long a grant or renewal lasts, counted by the database
	// clock from when the database runs the statement. At least MinTTL.
	// Defaults to 15s.
	TTL time.Duration
	// RenewInterval is how often held leases are renewed, all in one
	// statement. It must be below TTL-SafetyMargin. Defaults to TTL/3.
	RenewInterval time.Duration
	// SafetyMargin is how long before the end of the TTL this Client stops
	// trusting a lease. The local deadline of a grant or renewal is the
	// local time its request was sent plus TTL minus SafetyMargin; it covers
	// clock-rate differences between this machine and the database. It must
	// be below TTL. Defaults to TTL/10.
	SafetyMargin time.Duration
	// StatementTimeout bounds every statement and lock wait of the Client
	// on the server (statement_timeout, lock_timeout) and is the Client's
	// idle_in_transaction_session_timeout; the Client also gives up on a
	// statement after 1.5× it. 1.5× it must fit in TTL - SafetyMargin -
	// RenewInterval. Defaults to RenewInterval.
	StatementTimeout time.Duration
	// MinBackoff and MaxBackoff bound the exponential backoff (full jitter)
	// of Acquire between attempts. Default to 20ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// MaxConns is the size of the Client's own connection pool, derived
	// from the pool passed to New, so that renewals never queue behind
	// application queries. Clients (and partition members) of one pool
	// with the same MaxConns and StatementTimeout share one such pool; it
	// closes connections unused for a minute. Defaults to 4.
	MaxConns int32
	// Clock is the local clock for deadlines, renewal and backoff.
	// Defaults to SystemClock.
	Clock Clock
	// Rand is the source of backoff and renewal jitter; it must not be
	// shared with another Client. Defaults to a randomly seeded source; set
	// a seeded one for reproducible tests.
	Rand *rand.Rand
	// Hooks observe acquire and renew latency, losses and releases.
	// Defaults to none.
	Hooks Hooks
}

// withDefaults validates c and returns it with defaults filled in.
func (c Config) withDefaults() (Config, error) {
	if c.Owner == "" {
		c.Owner = DefaultOwner()
	} else if err := validName(c.Owner); err != nil {
		return c, &ConfigError{Field: "Owner", Reason: err.Error()}
	}
	for name, d := range map[string]time.Duration{"TTL": c.TTL, "RenewInterval": c.RenewInterval,
		"SafetyMargin": c.SafetyMargin, "StatementTimeout": c.StatementTimeout,
		"MinBackoff": c.MinBackoff, "MaxBackoff": c.MaxBackoff} {
		if d < 0 {
			return c, &ConfigError{Field: name, Reason: fmt.Sprintf("negative duration %v", d)}
		}
	}
	if c.MaxConns < 0 {
		return c, &ConfigError{Field: "MaxConns", Reason: "negative"}
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < MinTTL {
		return c, &ConfigError{Field: "TTL", Reason: fmt.Sprintf("%v is below the minimum %v", c.TTL, MinTTL)}
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = c.TTL / 10
	}
	if c.SafetyMargin >= c.TTL {
		return c, &ConfigError{Field: "SafetyMargin", Reason: fmt.Sprintf("%v is not below TTL %v", c.SafetyMargin, c.TTL)}
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.RenewInterval >= c.TTL-c.SafetyMargin {
		return c, &ConfigError{Field: "RenewInterval", Reason: fmt.Sprintf(
			"%v is not below TTL minus SafetyMargin (%v): the lease would count as lost before its first renewal",
			c.RenewInterval, c.TTL-c.SafetyMargin)}
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = c.RenewInterval
	}
	if c.StatementTimeout < time.Millisecond {
		return c, &ConfigError{Field: "StatementTimeout", Reason: fmt.Sprintf("%v is below 1ms", c.StatementTimeout)}
	}
	// The Client bounds a statement at 1.5×StatementTimeout on its side; a
	// hung renewal must end before the deadline it was meant to extend.
	if room := c.TTL - c.SafetyMargin - c.RenewInterval; c.StatementTimeout*3/2 > room {
		return c, &ConfigError{Field: "StatementTimeout", Reason: fmt.Sprintf(
			"%v: 1.5× it must fit in TTL - SafetyMargin - RenewInterval (%v)", c.StatementTimeout, room)}
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 20 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		return c, &ConfigError{Field: "MaxBackoff", Reason: fmt.Sprintf("%v is below MinBackoff %v", c.MaxBackoff, c.MinBackoff)}
	}
	if c.MaxConns == 0 {
		c.MaxConns = 4
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	return c, nil
}

// DefaultOwner returns an owner id unique to this process and call:
// "<hostname>-<pid>-<8 random hex digits>".
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	if len(host) > 200 {
		host = host[:200]
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()&0xffffffff|1<<32, 16)[1:]
}

func validName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidName, len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return fmt.Errorf("%w: contains a NUL byte", ErrInvalidName)
		}
	}
	return nil
}
