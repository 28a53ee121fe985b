package demo

import (
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/partition"
)

// ownersHeader is the header of the ownership table.
func ownersHeader(n int) string {
	var b strings.Builder
	b.WriteString("        partition ")
	for p := range n {
		fmt.Fprintf(&b, "%3d", p)
	}
	return b.String()
}

// ownersRow renders a group's status as one row of the ownership table:
// each partition's holder (the worker's number; "-" when no lease is held),
// then how many partitions each worker holds.
func ownersRow(st partition.Status, names []string) string {
	var b strings.Builder
	b.WriteString("owners   ")
	count := make(map[string]int)
	for _, ps := range st.Partitions {
		cell := "-"
		if ps.Held {
			cell = ps.Owner
			for i, n := range names {
				if n == ps.Owner {
					cell = fmt.Sprint(i + 1)
				}
			}
			count[ps.Owner]++
		}
		fmt.Fprintf(&b, "%3s", cell)
	}
	b.WriteString("   ")
	for _, n := range names {
		fmt.Fprintf(&b, "  %s:%d", n, count[n])
	}
	return b.String()
}

// count formats n with the singular or plural noun phrase.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// hold says that the workers named hold.
func hold(names []string) string {
	if len(names) == 1 {
		return names[0] + " holds"
	}
	return strings.Join(names, " and ") + " hold"
}

// more says that there are more than one.
func more(n int) string {
	if n > 1 {
		return "; and others"
	}
	return ""
}

// secs formats d as seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
