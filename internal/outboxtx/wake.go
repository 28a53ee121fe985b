package outboxtx

import "sync"

type slot struct {
	place, schema, group string
	partition            int
}

var (
	mu      sync.Mutex
	waiters = map[slot]map[chan struct{}]struct{}{}
	relays  = map[[3]string]int{} // place, schema, group -> relays open in this process
)

// Opened records that a relay of the group of schema at place (Place) is
// open in this process (until the returned close is called): its
// partitions' commits do not warn that no relay runs, also before the
// partition's relay registered.
func Opened(place, schema, group string) (closed func()) {
	k := [3]string{place, schema, group}
	mu.Lock()
	relays[k]++
	mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			if relays[k]--; relays[k] <= 0 {
				delete(relays, k)
			}
			mu.Unlock()
		})
	}
}

func opened(place, schema, group string) bool {
	mu.Lock()
	defer mu.Unlock()
	return relays[[3]string{place, schema, group}] > 0
}

// Register makes Wake(place, schema, group, partition) signal the
// returned channel (buffered: a wake-up while the relay is busy is kept)
// until unregister is called. Several relays of one partition (a grant's
// and the next's, briefly) are each woken.
func Register(place, schema, group string, partition int) (wake <-chan struct{}, unregister func()) {
	k := slot{place, schema, group, partition}
	ch := make(chan struct{}, 1)
	mu.Lock()
	if waiters[k] == nil {
		waiters[k] = map[chan struct{}]struct{}{}
	}
	waiters[k][ch] = struct{}{}
	mu.Unlock()
	return ch, func() {
		mu.Lock()
		delete(waiters[k], ch)
		if len(waiters[k]) == 0 {
			delete(waiters, k)
		}
		mu.Unlock()
	}
}

// Wake signals the relays registered for the partition, and reports
// whether one is.
func Wake(place, schema, group string, partition int) bool {
	mu.Lock()
	defer mu.Unlock()
	chs := waiters[slot{place, schema, group, partition}]
	for ch := range chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return len(chs) > 0
}
