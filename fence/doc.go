// Package fence holds fencing tokens: the strictly increasing numbers a lease
// hands out with each grant. A resource that remembers the highest token it
// has seen can refuse a write carrying a lower one, which is what makes a
// lease safe against a holder that paused past its expiry.
package fence
