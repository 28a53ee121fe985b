package chaos

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPlanIsDeterministicPerSeed(t *testing.T) {
	a := Plan(1, 90*time.Second, 2*time.Second, 3, Kinds)
	b := Plan(1, 90*time.Second, 2*time.Second, 3, Kinds)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if c := Plan(2, 90*time.Second, 2*time.Second, 3, Kinds); reflect.DeepEqual(a, c) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
}

// A fault phase of at least one slot per kind injects every kind, and
// every fault is healed inside its slot, after lasting past the TTL where
// the kind needs it.
func TestPlanCoversEveryKindWithinSlots(t *testing.T) {
	ttl := 2 * time.Second
	slot := SlotLength(ttl)
	for seed := range int64(20) {
		d := time.Duration(len(Kinds))*slot + slot/2
		plan := Plan(seed, d, ttl, 3, Kinds)
		if len(plan) != len(Kinds) {
			t.Fatalf("seed %d: %d faults in %v; want %d", seed, len(plan), d, len(Kinds))
		}
		seen := map[Kind]bool{}
		for i, f := range plan {
			seen[f.Kind] = true
			start := time.Duration(i) * slot
			end := f.At + f.For
			if f.Kind == SkewBackward && f.HoldAfter+f.HoldFor > f.For {
				t.Errorf("seed %d: %v: its hold outlasts it", seed, f)
			}
			if f.At < start || end > start+slot-ttl {
				t.Errorf("seed %d: %v leaves slot %d [%v, %v) less than a TTL to recover", seed, f, i, start, start+slot)
			}
			if f.Worker < 0 || f.Worker >= 3 {
				t.Errorf("seed %d: %v: worker out of range", seed, f)
			}
			if (f.Kind == Pause || f.Kind == Hold) && f.For <= ttl {
				t.Errorf("seed %d: %v does not outlast the TTL", seed, f)
			}
			if f.Kind == SkewBackward && f.HoldFor <= ttl {
				t.Errorf("seed %d: %v: its hold does not outlast the TTL", seed, f)
			}
		}
		if len(seen) != len(Kinds) {
			t.Errorf("seed %d: kinds %v; want all of %v", seed, seen, Kinds)
		}
	}
	if p := Plan(1, time.Minute, ttl, 3, []Kind{Pause}); len(p) != 6 || p[5].Kind != Pause {
		t.Fatalf("a one-kind plan: %v", p)
	}
	if p := Plan(1, time.Minute, ttl, 0, Kinds); p != nil {
		t.Fatalf("no workers: %v", p)
	}
}

func TestParseKinds(t *testing.T) {
	all, err := ParseKinds("all")
	if err != nil || len(all) != len(Kinds) {
		t.Fatalf("all: %v %v", all, err)
	}
	two, err := ParseKinds(" pause, kill,pause")
	if err != nil || !reflect.DeepEqual(two, []Kind{Pause, Kill}) {
		t.Fatalf("pause,kill: %v %v", two, err)
	}
	if _, err := ParseKinds("pause,meteor"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "meteor") {
		t.Fatalf("unknown kind: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no command":     {},
		"negative jobs":  {Command: fakeCommand, Jobs: -1},
		"tiny ttl":       {Command: fakeCommand, TTL: time.Millisecond},
		"bad schema":     {Command: fakeCommand, Schema: "a;b"},
		"bad workload":   {Command: fakeCommand, Workload: "kafka?"},
		"stall above 1":  {Command: fakeCommand, StallProbability: 2},
		"too many procs": {Command: fakeCommand, Workers: 100},
		"relay kill > 1": {Command: fakeCommand, Workload: "kafka-out", RelayKill: 1.5},
	} {
		if _, err := cfg.withDefaults(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v; want ErrInvalidConfig", name, err)
		}
	}
	c, err := Config{Command: fakeCommand, Duration: 10 * time.Second}.withDefaults()
	if err != nil || c.Workers != 3 || c.Partitions != 16 || c.Jobs != 300 || c.TTL != 2*time.Second ||
		len(c.Faults) != len(Kinds) || c.StallProbability != 0.05 || c.Schema != "leasehold_chaos" ||
		c.RelayKill != 0 || c.RelayPause != 0 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}

// The relay kills and pauses are kafka-out's: on by default there, off
// for the other workloads, and the control has no relay pauses (its relay
// has no transactions); negative turns them off.
func TestConfigRelayFaults(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg         Config
		kill, pause float64
	}{
		"kafka-out":          {Config{Workload: "kafka-out"}, DefaultRelayKill, DefaultRelayPause},
		"kafka-out control":  {Config{Workload: "kafka-out", Unfenced: true}, DefaultRelayKill, 0},
		"kafka-out, set":     {Config{Workload: "kafka-out", RelayKill: 0.5, RelayPause: 0.25}, 0.5, 0.25},
		"kafka-out, off":     {Config{Workload: "kafka-out", RelayKill: -1, RelayPause: -1}, 0, 0},
		"kafka ignores them": {Config{Workload: "kafka", RelayKill: 0.5, RelayPause: 0.5}, 0, 0},
	} {
		tc.cfg.Command = fakeCommand
		c, err := tc.cfg.withDefaults()
		if err != nil || c.RelayKill != tc.kill || c.RelayPause != tc.pause {
			t.Errorf("%s: RelayKill %v, RelayPause %v (%v); want %v, %v", name, c.RelayKill, c.RelayPause, err, tc.kill, tc.pause)
		}
	}
}
