package partition

import "github.com/cespare/xxhash/v2"

// Of returns the partition of key among n partitions:
//
//	XXH64(key, seed 0) mod n
//
// XXH64 has implementations in every common language, so producers written
// in other languages can compute a job's partition too. It is the hash the
// assignment uses as well. Of returns -1 when n < 1.
func Of(key []byte, n int) int {
	if n < 1 {
		return -1
	}
	return int(xxhash.Sum64(key) % uint64(n))
}

// OfString is Of for a string key.
func OfString(key string, n int) int {
	if n < 1 {
		return -1
	}
	return int(xxhash.Sum64String(key) % uint64(n))
}
