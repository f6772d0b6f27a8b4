package main

import (
	"math"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		xs          []float64
		med, lo, hi float64
		hasCI       bool
		pm          float64
	}{
		{xs: []float64{3, 1, 2}, med: 2}, // too few for an interval
		{xs: []float64{5, 1, 4, 2, 6, 3}, med: 3.5, lo: 1, hi: 6, hasCI: true, pm: 2.5 / 3.5},              // n=6: the whole range (96.9%)
		{xs: []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, med: 5.5, lo: 2, hi: 9, hasCI: true, pm: 3.5 / 5.5}, // n=10: x(1)..x(8) (97.9%)
		{xs: []float64{7, 7, 7, 7, 7, 7}, med: 7, lo: 7, hi: 7, hasCI: true, pm: 0},
	} {
		s := summarize(tc.xs)
		if s.Median != tc.med || s.HasCI != tc.hasCI || tc.hasCI && (s.Lo != tc.lo || s.Hi != tc.hi) {
			t.Errorf("summarize(%v) = %+v, want median %v, CI %v [%v, %v]", tc.xs, s, tc.med, tc.hasCI, tc.lo, tc.hi)
		}
		if pm := s.Pm(); tc.hasCI && math.Abs(pm-tc.pm) > 1e-12 || !tc.hasCI && !math.IsNaN(pm) {
			t.Errorf("summarize(%v).Pm() = %v, want %v", tc.xs, pm, tc.pm)
		}
	}
	if c := coverage(6, 0); math.Abs(c-62.0/64) > 1e-12 {
		t.Errorf("coverage(6, 0) = %v, want 62/64", c)
	}
}
