package chaos

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// WorkerFlags registers on fs the flags of one worker process (the hidden
// `leasehold chaos worker`), filling cfg when fs is parsed. Args writes
// them: the orchestrator and its workers share this one definition.
func WorkerFlags(fs *pflag.FlagSet, cfg *WorkerConfig) {
	fs.StringVar(&cfg.ID, "id", "", "member id")
	fs.StringVar(&cfg.DatabaseURL, "database-url", "", "database URL (through the worker's proxy)")
	fs.StringVar(&cfg.Workload, "workload", "queue", "workload")
	fs.StringVar(&cfg.Env.Schema, "schema", defaultSchema, "schema")
	fs.StringVar(&cfg.Env.Group, "group", group, "partition group")
	fs.IntVar(&cfg.Env.Partitions, "partitions", 16, "partitions")
	fs.IntVar(&cfg.Env.Keys, "keys", 64, "keys")
	fs.StringSliceVar(&cfg.Env.Brokers, "brokers", nil, "Kafka seed brokers of the kafka workload (comma-separated)")
	fs.DurationVar(&cfg.TTL, "ttl", 2*time.Second, "lease TTL")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the handler stalls")
	fs.Float64Var(&cfg.StallProbability, "stall", 0, "probability that a handler stalls past the TTL")
	fs.StringVar(&cfg.History, "history", "", "history file (JSON lines)")
	fs.StringVar(&cfg.SkewFile, "skew-file", "", "file holding the clock offset in milliseconds")
	fs.BoolVar(&cfg.Unfenced, "unfenced", false, "apply effects outside the fence (control)")
	fs.Float64Var(&cfg.RelayKill, "relay-kill", 0, "probability that the worker kills itself (SIGKILL) right after a relay's Kafka commit (kafka-out)")
	fs.Float64Var(&cfg.RelayPause, "relay-pause", 0, "probability, per record a relay produced in a transaction, that the worker stops itself (SIGSTOP) there (kafka-out)")
	fs.StringVar(&cfg.PauseFile, "pause-file", "", "file through which the worker asks to be resumed after a relay pause")
	fs.BoolVar(&cfg.TransactionPooling, "transaction-pooling", false, "the database URL goes through a pooler in transaction mode")
}

// Args returns the flags that WorkerFlags parses back into cfg (its Logger
// aside).
func (cfg WorkerConfig) Args() []string {
	args := []string{
		"--id", cfg.ID, "--database-url", cfg.DatabaseURL, "--workload", cfg.Workload,
		"--schema", cfg.Env.Schema, "--group", cfg.Env.Group, "--partitions", strconv.Itoa(cfg.Env.Partitions),
		"--keys", strconv.Itoa(cfg.Env.Keys), "--ttl", cfg.TTL.String(), "--seed", strconv.FormatInt(cfg.Seed, 10),
		"--stall", strconv.FormatFloat(cfg.StallProbability, 'g', -1, 64),
		"--history", cfg.History, "--skew-file", cfg.SkewFile,
	}
	if len(cfg.Env.Brokers) > 0 {
		args = append(args, "--brokers", strings.Join(cfg.Env.Brokers, ","))
	}
	if cfg.Unfenced {
		args = append(args, "--unfenced")
	}
	if cfg.RelayKill != 0 {
		args = append(args, "--relay-kill", strconv.FormatFloat(cfg.RelayKill, 'g', -1, 64))
	}
	if cfg.RelayPause != 0 {
		args = append(args, "--relay-pause", strconv.FormatFloat(cfg.RelayPause, 'g', -1, 64))
	}
	if cfg.PauseFile != "" {
		args = append(args, "--pause-file", cfg.PauseFile)
	}
	if cfg.TransactionPooling {
		args = append(args, "--transaction-pooling")
	}
	return args
}
