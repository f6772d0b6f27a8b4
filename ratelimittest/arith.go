package ratelimittest

import "math/bits"

// Exact integer arithmetic for the algorithms. Times are int64 nanoseconds;
// products that can exceed 64 bits go through math/bits.

// never is the wait reported for a request whose cost exceeds what a policy
// can ever admit.
const never = -1

// floorDiv is a/b rounded toward minus infinity, for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

// mul128 returns a*b for a, b >= 0.
func mul128(a, b int64) u128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}
}

// cmp returns -1, 0 or +1 as x is less than, equal to or greater than y.
func (x u128) cmp(y u128) int {
	switch {
	case x.hi < y.hi:
		return -1
	case x.hi > y.hi:
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0, saturating at
// MaxInt64 when the quotient does not fit.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return maxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > maxInt64 {
		return maxInt64
	}
	return int64(q)
}

// mulDivCeil returns ceil(a*b/c) for a, b >= 0 and c > 0, saturating.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return maxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	if q > maxInt64 {
		return maxInt64
	}
	return int64(q)
}

const maxInt64 = 1<<63 - 1

// mulDivRound returns a*b/c rounded to the nearest integer, halves up, for
// a, b >= 0 and c > 0, saturating.
func mulDivRound(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return maxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r >= uint64(c)-r {
		q++
	}
	if q > maxInt64 {
		return maxInt64
	}
	return int64(q)
}
