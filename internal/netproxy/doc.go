// Package netproxy is an in-process TCP proxy that injects network faults
// (cut, blackhole, latency) between a client and a server on loopback, for
// failure tests.
package netproxy
