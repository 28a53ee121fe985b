package history

import (
	"fmt"
	"sort"
	"time"
)

// Grant is one grant of a lease: a (name, token) pair and the window in
// which the database considered it valid, from its grant to its last
// recorded expiry (a release records the release time as the expiry).
type Grant struct {
	Name  string
	Owner string
	Token int64
	Start time.Time
	End   time.Time
}

// Report is the outcome of Check.
type Report struct {
	Grants     int
	Names      int
	Violations []string
	// Superseded counts grants cut short by a new grant to the same owner
	// (an acquire retried after an unknown outcome). The earlier token is
	// fenced by the later one; these are not violations.
	Superseded int
}

// OK reports whether no invariant was violated.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Grants folds row versions (in write order) into grants per name, in
// write order.
func Grants(vs []Version) map[string][]Grant {
	sorted := append([]Version(nil), vs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Seq < sorted[j].Seq })
	out := make(map[string][]Grant)
	for _, v := range sorted {
		gs := out[v.Name]
		if n := len(gs); n > 0 && gs[n-1].Token == v.Token {
			gs[n-1].End = v.ExpiresAt
			continue
		}
		out[v.Name] = append(gs, Grant{Name: v.Name, Owner: v.Owner, Token: v.Token, Start: v.AcquiredAt, End: v.ExpiresAt})
	}
	return out
}

// Check verifies, per lease name, that tokens strictly increase from grant
// to grant in write order, that a token is never granted twice, and that
// each grant starts no earlier than the previous grant (of another owner)
// ended.
func Check(vs []Version) Report {
	var r Report
	for name, gs := range Grants(vs) {
		r.Names++
		r.Grants += len(gs)
		seen := make(map[int64]bool, len(gs))
		for i, g := range gs {
			if seen[g.Token] {
				r.Violations = append(r.Violations, fmt.Sprintf("%q: token %d granted twice", name, g.Token))
			}
			seen[g.Token] = true
			if i == 0 {
				continue
			}
			prev := gs[i-1]
			if g.Token <= prev.Token {
				r.Violations = append(r.Violations, fmt.Sprintf("%q: token %d (owner %s) granted after token %d (owner %s)",
					name, g.Token, g.Owner, prev.Token, prev.Owner))
			}
			if g.Start.Before(prev.End) {
				if g.Owner == prev.Owner {
					r.Superseded++
					continue
				}
				r.Violations = append(r.Violations, fmt.Sprintf(
					"%q: overlap: token %d (owner %s) valid until %s, token %d (owner %s) granted at %s",
					name, prev.Token, prev.Owner, prev.End.Format(time.RFC3339Nano),
					g.Token, g.Owner, g.Start.Format(time.RFC3339Nano)))
			}
		}
	}
	sort.Strings(r.Violations)
	return r
}
