package main

import (
	"math"
	"slices"
)

// A Sample is one run of a benchmark.
type Sample struct {
	NsPerOp, BytesPerOp, AllocsPerOp float64
}

// A Summary is what the report says of a metric over several runs: its
// median and the 95% confidence interval of the median, as benchstat
// reports them.
type Summary struct {
	Median, Lo, Hi float64
	N              int
	HasCI          bool // false with fewer than 6 runs
}

// Pm returns the confidence interval's half-width as a fraction of the
// median (benchstat's "± x%"), or NaN without an interval.
func (s Summary) Pm() float64 {
	if !s.HasCI || s.Median == 0 {
		if s.HasCI && s.Lo == s.Hi {
			return 0
		}
		return math.NaN()
	}
	return max(s.Hi-s.Median, s.Median-s.Lo) / s.Median
}

// summarize returns the median of xs with a distribution-free 95%
// confidence interval: the widest-in order statistics [x(i), x(n-1-i)]
// whose coverage, P(i+1 <= B <= n-1-i) for B ~ Binomial(n, 1/2), is still
// at least 95% (the method benchstat uses).
func summarize(xs []float64) Summary {
	n := len(xs)
	if n == 0 {
		return Summary{Median: math.NaN()}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := Summary{N: n, Median: s[n/2]}
	if n%2 == 0 {
		sum.Median = (s[n/2-1] + s[n/2]) / 2
	}
	for i := (n - 1) / 2; i >= 0; i-- {
		if coverage(n, i) >= 0.95 {
			sum.Lo, sum.Hi, sum.HasCI = s[i], s[n-1-i], true
			break
		}
	}
	return sum
}

// coverage returns P(i+1 <= B <= n-1-i) for B ~ Binomial(n, 1/2).
func coverage(n, i int) float64 {
	p := 0.0
	for k := i + 1; k <= n-1-i; k++ {
		p += binomial(n, k)
	}
	return p / math.Pow(2, float64(n))
}

func binomial(n, k int) float64 {
	r := 1.0
	for j := 1; j <= k; j++ {
		r = r * float64(n-k+j) / float64(j)
	}
	return r
}
