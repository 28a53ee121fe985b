package outboxtx

import "sync"

type slot struct {
	schema, group string
	partition     int
}

var (
	mu      sync.Mutex
	waiters = map[slot]chan struct{}{}
	relays  = map[[2]string]int{} // schema, group -> relays open in this process
)

// Opened records that a relay of schema's group is open in this process
// (until the returned close is called): its partitions' commits do not
// warn that no relay runs, also before the partition's relay registered.
func Opened(schema, group string) (closed func()) {
	k := [2]string{schema, group}
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

func opened(schema, group string) bool {
	mu.Lock()
	defer mu.Unlock()
	return relays[[2]string{schema, group}] > 0
}

// Register makes Wake(schema, group, partition) signal the returned
// channel (buffered: a wake-up while the relay is busy is kept) until
// unregister is called. One relay per partition and process: a second
// Register of the same partition replaces the first.
func Register(schema, group string, partition int) (wake <-chan struct{}, unregister func()) {
	k := slot{schema, group, partition}
	ch := make(chan struct{}, 1)
	mu.Lock()
	waiters[k] = ch
	mu.Unlock()
	return ch, func() {
		mu.Lock()
		if waiters[k] == ch {
			delete(waiters, k)
		}
		mu.Unlock()
	}
}

// Wake signals the relay registered for the partition, and reports whether
// one is.
func Wake(schema, group string, partition int) bool {
	mu.Lock()
	ch, ok := waiters[slot{schema, group, partition}]
	mu.Unlock()
	if ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return ok
}
