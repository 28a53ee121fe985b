package fence

import "strconv"

// Token is a fencing token. Tokens of one lease name strictly increase with
// every grant, across releases, expiries and clean-up of old rows; a larger
// token always means a later grant. The zero Token is never granted.
type Token int64

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatInt(int64(t), 10) }

// Valid reports whether t could have been granted (it is positive).
func (t Token) Valid() bool { return t > 0 }
