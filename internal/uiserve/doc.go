// Package uiserve serves the web UI (package ui) on a TCP address for the
// leasehold command: `leasehold ui` and `leasehold demo --ui`. It binds the
// address first, so that an address in use is reported at once, in the
// command's terms (ErrAddrInUse naming the --addr flag), and serves until
// the context ends, then shuts down gracefully: requests in flight (a page
// being read) finish within ShutdownTimeout. On a loopback address it
// answers only to the loopback names (and Options.AllowedHosts), against
// DNS rebinding; it bounds the reading, writing and idling of connections.
package uiserve
