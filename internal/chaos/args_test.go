package chaos

import (
	"reflect"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The flags the orchestrator writes for a worker parse back, through the
// flags the worker registers, into the same configuration.
func TestWorkerArgsParseBack(t *testing.T) {
	for name, want := range map[string]WorkerConfig{
		"queue": {ID: "w1.2", DatabaseURL: "postgres://u@127.0.0.1:5/db", Workload: "queue",
			Env: Env{Schema: "s", Group: "g", Partitions: 12, Keys: 7},
			TTL: 1500 * time.Millisecond, Seed: 42, StallProbability: 0.25, History: "/tmp/h.jsonl", SkewFile: "/tmp/w1.skew"},
		"kafka unfenced": {ID: "w0.1", DatabaseURL: "postgres://u@h:1/d", Workload: "kafka",
			Env: Env{Schema: "leasehold_chaos", Group: "chaos", Partitions: 8, Keys: 64, Brokers: []string{"127.0.0.1:1", "127.0.0.1:2"}},
			TTL: time.Second, Seed: -3, StallProbability: 0, History: "h", SkewFile: "s", Unfenced: true},
		"kafka-out": {ID: "w2.7", DatabaseURL: "postgres://u@h:1/d", Workload: "kafka-out",
			Env: Env{Schema: "leasehold_chaos", Group: "chaos", Partitions: 16, Keys: 64, Brokers: []string{"127.0.0.1:9"}},
			TTL: time.Second, Seed: 1, StallProbability: 0.05, History: "h", SkewFile: "s",
			RelayKill: 0.005, RelayPause: 1.0 / 150, PauseFile: "/tmp/w2.pause"},
	} {
		var got WorkerConfig
		fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
		WorkerFlags(fs, &got)
		if err := fs.Parse(want.Args()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parsed back\n%+v\nwant\n%+v", name, got, want)
		}
	}
}
