package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds.
const (
	// Pause stops a worker process with SIGSTOP for longer than the lease
	// TTL, then resumes it with SIGCONT: the classic zombie.
	Pause Kind = "pause"
	// Kill kills a worker process with SIGKILL and starts a new one in its
	// place, connected through the same proxy.
	Kill Kind = "kill"
	// Hold stops a worker's database connection in both directions (bytes
	// are held by the proxy, not dropped) for longer than the TTL, then
	// heals it: the held bytes, stale commits included, are delivered.
	Hold Kind = "hold"
	// Latency delays every chunk of a worker's connection, both ways.
	Latency Kind = "latency"
	// SkewForward moves a worker's lease clock forwards.
	SkewForward Kind = "skew_forward"
	// SkewBackward moves a worker's lease clock backwards, then holds its
	// connection past the TTL: the worker believes its leases live longer
	// than the database does.
	SkewBackward Kind = "skew_backward"
	// RestartPG restarts PostgreSQL itself (fast shutdown, then start).
	RestartPG Kind = "pg_restart"
)

// RelayKill is not scheduled: it is a kafka-out worker killing itself
// (SIGKILL) right after one of its relays committed a Kafka transaction,
// before deleting what it published (Config.RelayKill). The orchestrator
// starts the worker again at once and reports each as a fault of this kind.
const RelayKill Kind = "relay_kill"

// RelayPause is not scheduled either: it is a kafka-out worker stopping
// itself (SIGSTOP) just before one of its relays' commit requests reaches
// Kafka (Config.RelayPause), for 2 to 3 TTLs: the pause fault, timed so
// that a relay is caught in the middle of its transaction, past its lease.
// The orchestrator resumes it (SIGCONT) and reports each as a fault of
// this kind.
const RelayPause Kind = "relay_pause"

// Kinds lists every fault kind, in a fixed order.
var Kinds = []Kind{Pause, Kill, Hold, Latency, SkewForward, SkewBackward, RestartPG}

// ParseKinds parses a comma-separated list of fault kinds; "" or "all"
// means every kind.
func ParseKinds(s string) ([]Kind, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return append([]Kind(nil), Kinds...), nil
	}
	var out []Kind
	seen := map[Kind]bool{}
	for _, f := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(f))
		ok := false
		for _, known := range Kinds {
			ok = ok || k == known
		}
		if !ok {
			return nil, fmt.Errorf("%w: unknown fault %q (known: %s)", ErrInvalidConfig, k, kindList())
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Fault is one scheduled fault.
type Fault struct {
	Kind Kind `json:"kind"`
	// At is when the fault is injected, from the start of the fault phase.
	At time.Duration `json:"at"`
	// Worker is the index of the worker it targets (unused by RestartPG).
	Worker int `json:"worker"`
	// For is how long the fault lasts before it is healed: the pause, the
	// hold, the latency or the skew; for Kill, how long the worker stays
	// dead before its replacement starts.
	For time.Duration `json:"for"`
	// Latency is the one-way delay of a Latency fault.
	Latency time.Duration `json:"latency,omitempty"`
	// Skew is the clock offset of a skew fault (negative: backwards).
	Skew time.Duration `json:"skew,omitempty"`
	// HoldAfter and HoldFor place the connection hold of a SkewBackward
	// fault, from its injection.
	HoldAfter time.Duration `json:"hold_after,omitempty"`
	HoldFor   time.Duration `json:"hold_for,omitempty"`
}

// String describes f in one line.
func (f Fault) String() string {
	switch f.Kind {
	case RestartPG:
		return fmt.Sprintf("%s at %v", f.Kind, f.At)
	case Latency:
		return fmt.Sprintf("%s %v on w%d at %v for %v", f.Kind, f.Latency, f.Worker, f.At, f.For)
	case SkewForward, SkewBackward:
		return fmt.Sprintf("%s %+v on w%d at %v for %v", f.Kind, f.Skew, f.Worker, f.At, f.For)
	}
	return fmt.Sprintf("%s w%d at %v for %v", f.Kind, f.Worker, f.At, f.For)
}

// SlotLength is the time the schedule gives each fault (injection, heal and
// recovery) for a lease TTL: 5 TTLs.
func SlotLength(ttl time.Duration) time.Duration { return 5 * ttl }

// Plan returns the fault schedule of a fault phase of length d: one fault
// per slot of SlotLength(ttl), the first len(kinds) slots a seeded
// permutation of kinds (so a phase of at least len(kinds) slots injects
// every kind), the rest drawn at random from kinds; each fault targets a
// random one of workers workers and is healed within its slot. The same
// arguments always give the same schedule.
func Plan(seed int64, d, ttl time.Duration, workers int, kinds []Kind) []Fault {
	if workers < 1 || len(kinds) == 0 || ttl <= 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x6c6561736568))
	slot := SlotLength(ttl)
	n := int(d / slot)
	order := append([]Kind(nil), kinds...)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	between := func(lo, hi float64) time.Duration { // a multiple of ttl
		return time.Duration((lo + r.Float64()*(hi-lo)) * float64(ttl)).Round(time.Millisecond)
	}
	var out []Fault
	for i := range n {
		k := order[i%len(order)]
		if i >= len(order) {
			k = kinds[r.IntN(len(kinds))]
		}
		f := Fault{Kind: k, At: time.Duration(i)*slot + between(0, 0.25), Worker: r.IntN(workers)}
		switch k {
		case Pause:
			f.For = between(1.5, 2.5)
		case Kill:
			f.For = between(0.1, 0.75)
		case Hold:
			f.For = between(1.5, 2.5)
		case Latency:
			f.For = between(1.5, 2.5)
			f.Latency = time.Duration(20+r.IntN(130)) * time.Millisecond
		case SkewForward:
			f.For = between(1.5, 2.5)
			f.Skew = between(1, 3)
		case SkewBackward:
			f.For = between(2.5, 3)
			f.Skew = -between(1, 3)
			f.HoldAfter = between(0.25, 0.5)
			f.HoldFor = between(1.5, 2)
		case RestartPG:
		}
		out = append(out, f)
	}
	return out
}
