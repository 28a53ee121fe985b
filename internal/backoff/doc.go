// Package backoff computes capped exponential backoff with full jitter from
// an injectable random source.
package backoff
