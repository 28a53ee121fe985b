package backoff

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff yields delays drawn uniformly from [0, min(Max, Min*2^attempt)).
// It is safe for concurrent use.
type Backoff struct {
	Min, Max time.Duration

	mu  sync.Mutex
	rng *rand.Rand
}

// New returns a Backoff drawing from rng; a nil rng means a randomly seeded one.
func New(minDelay, maxDelay time.Duration, rng *rand.Rand) *Backoff {
	if rng == nil {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return &Backoff{Min: minDelay, Max: maxDelay, rng: rng}
}

// Delay returns the delay before retry number attempt (0-based).
func (b *Backoff) Delay(attempt int) time.Duration {
	ceil := b.Max
	if attempt < 62 && b.Min <= b.Max>>attempt { // no overflow: Min<<attempt <= Max
		ceil = b.Min << attempt
	}
	if ceil <= 0 {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Duration(b.rng.Int64N(int64(ceil)))
}

// Float64 returns a number in [0, 1) from the same source, for other jitter.
func (b *Backoff) Float64() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rng.Float64()
}
