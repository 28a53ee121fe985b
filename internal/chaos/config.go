package chaos

import (
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"time"

	"github.com/leasehold/leasehold/internal/store"
)

// Config configures a run. The zero value of every optional field means
// its default.
type Config struct {
	// DatabaseURL is a postgres:// URL of the server to run against; the
	// run uses (and first drops) the schema Schema. Defaults to a
	// throwaway cluster started from the installed server binaries, which
	// the run may restart (the pg_restart fault is skipped otherwise).
	DatabaseURL string
	// Schema is the schema of the run's tables. Defaults to
	// "leasehold_chaos".
	Schema string
	// Workload names the workload. Defaults to "queue".
	Workload string
	// Workers is the number of worker processes. Defaults to 3.
	Workers int
	// Partitions is the group's partition count. Defaults to 16.
	Partitions int
	// Keys is the number of job keys. Defaults to 64.
	Keys int
	// Jobs is the number of jobs fed in, evenly over Duration. Defaults to
	// 30 per second of Duration.
	Jobs int
	// Duration is the fault phase: jobs are fed and faults injected for
	// this long. Defaults to 90s.
	Duration time.Duration
	// Drain bounds the wait, after the fault phase, for every job to
	// finish. Defaults to 60s.
	Drain time.Duration
	// TTL is the lease TTL. Defaults to 2s.
	TTL time.Duration
	// Seed seeds the fault schedule and the handler stalls. Defaults to 0.
	Seed int64
	// Faults are the fault kinds to inject. Defaults to every kind.
	Faults []Kind
	// StallProbability is the chance that a handler run stalls past the
	// TTL, ignoring its context, then commits. Defaults to 0.05; negative
	// means never.
	StallProbability float64
	// PgBouncer runs the workers behind a PgBouncer in transaction pooling
	// mode, started for the run (Debian's pgbouncer package): each
	// worker's fault proxy leads to it, and it to the server. The workers
	// set leasehold.Config.TransactionPooling and do not LISTEN (they
	// poll). Defaults to false: the proxies lead to the server.
	PgBouncer bool
	// Unfenced is the control: the workers apply effects outside the
	// fenced transaction, as an at-least-once queue does, and the run must
	// show duplicates. Never a user option. Defaults to false.
	Unfenced bool
	// RelayKill is the probability, per record of each Kafka transaction
	// a relay commits, that the kafka-out workload's worker kills itself
	// (SIGKILL) right after the commit, before anything after it; the orchestrator starts
	// it again at once and reports it as a fault of kind RelayKill.
	// Defaults to DefaultRelayKill for kafka-out; negative means never;
	// the other workloads ignore it.
	RelayKill float64
	// RelayPause is the probability, per record a relay produces in a
	// Kafka transaction, that the kafka-out workload's worker stops
	// itself (SIGSTOP) just before that transaction's commit reaches
	// Kafka, for 2 to 3 TTLs: a relay paused past its lease in the middle
	// of its transaction. The orchestrator resumes it and reports it as a fault
	// of kind RelayPause. Defaults to DefaultRelayPause for kafka-out;
	// negative means never; the other workloads, and the control
	// (Unfenced: its relay has no transactions), ignore it.
	RelayPause float64
	// Command returns the command that starts one worker process with the
	// given arguments (the flags of `leasehold chaos worker`). Required.
	Command func(args ...string) *exec.Cmd
	// Dir holds the workers' histories, logs and skew files. Defaults to a
	// temporary directory, removed after a passing run.
	Dir string
	// Out receives one line per step and fault. Defaults to io.Discard.
	Out io.Writer
	// Logger receives the orchestrator's logs. Defaults to a discarding
	// logger.
	Logger *slog.Logger
}

// DefaultRelayKill is the kafka-out workload's default Config.RelayKill:
// about one relay kill per 7 seconds at the default feed rate (30 records
// a second), so that a 45-second run has 7 on average, and none with a
// probability of about 0.1%.
const DefaultRelayKill = 1.0 / 200

// DefaultRelayPause is the kafka-out workload's default Config.RelayPause:
// about one relay pause per 5 seconds at the default feed rate, so that a
// 45-second run has 9 on average, and none with a probability of about
// 0.01%.
const DefaultRelayPause = 1.0 / 150

// defaultSchema is the schema of a run's tables unless Config.Schema names
// another.
const defaultSchema = "leasehold_chaos"

func (c Config) withDefaults() (Config, error) {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, reason)
	}
	switch {
	case c.Command == nil:
		return c, bad("Command", "required")
	case c.Workers < 0 || c.Partitions < 0 || c.Keys < 0 || c.Jobs < 0:
		return c, bad("Workers/Partitions/Keys/Jobs", "negative")
	case c.Duration < 0 || c.Drain < 0 || c.TTL < 0:
		return c, bad("Duration/Drain/TTL", "negative")
	case c.StallProbability > 1:
		return c, bad("StallProbability", "above 1")
	case c.RelayKill > 1 || c.RelayPause > 1:
		return c, bad("RelayKill/RelayPause", "above 1")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	if c.Schema == "" {
		c.Schema = defaultSchema
	}
	if _, err := store.Quote(c.Schema); err != nil {
		return c, bad("Schema", err.Error())
	}
	if c.Workload == "" {
		c.Workload = "queue"
	}
	if _, err := WorkloadNamed(c.Workload); err != nil {
		return c, err
	}
	defInt(&c.Workers, 3)
	defInt(&c.Partitions, 16)
	defInt(&c.Keys, 64)
	def(&c.Duration, 90*time.Second)
	def(&c.Drain, 60*time.Second)
	def(&c.TTL, 2*time.Second)
	defInt(&c.Jobs, int(30*c.Duration.Seconds()))
	if c.Partitions > 1024 {
		return c, bad("Partitions", "above 1024")
	}
	if c.Workers > 32 {
		return c, bad("Workers", "above 32")
	}
	if c.TTL < 500*time.Millisecond {
		return c, bad("TTL", "below 500ms")
	}
	if c.Faults == nil {
		c.Faults = append([]Kind(nil), Kinds...)
	}
	switch {
	case c.StallProbability == 0:
		c.StallProbability = 0.05
	case c.StallProbability < 0:
		c.StallProbability = 0
	}
	switch {
	case c.Workload != "kafka-out" || c.RelayKill < 0:
		c.RelayKill = 0
	case c.RelayKill == 0:
		c.RelayKill = DefaultRelayKill
	}
	switch {
	case c.Workload != "kafka-out" || c.Unfenced || c.RelayPause < 0:
		c.RelayPause = 0
	case c.RelayPause == 0:
		c.RelayPause = DefaultRelayPause
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
