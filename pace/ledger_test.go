package pace

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLedgerSqueeze: a full ledger stays within its bound, keeps every unit
// and the order of time, never dates a unit earlier than it was counted,
// and keeps its newest entries as they were.
func TestLedgerSqueeze(t *testing.T) {
	var l ledger
	const most = 64
	for i := range int64(10 * most) {
		l.addUpTo(1000*(i+1), 1, 1, most)
		require.LessOrEqual(t, len(l.e), most)
		require.Equal(t, i+1, l.total())
		for j := 1; j < len(l.e); j++ {
			require.Less(t, l.e[j-1].at, l.e[j].at, "in order")
		}
		// Every unit counted at or before t is counted at or before t
		// (merges take the later instant), and the newest is exact.
		require.Equal(t, 1000*(i+1), l.e[len(l.e)-1].at)
		require.Equal(t, int64(1), l.e[len(l.e)-1].n)
		require.LessOrEqual(t, l.sum(0, 1000*(i+1)/2), (i+1)/2, "no unit dated earlier than it was")
	}
	require.Equal(t, l.sum(1000*(10*most-most/4), 1000*10*most), int64(most/4), "the newest quarter is exact")
}

// TestLedgerSum: sum's running totals count what a scan of every entry
// counts, over ledgers built by adds out of order, merges, squeezes,
// prunes, the oldest units taken and a round trip through the encoding,
// and ranges that start before, inside and after them; total too.
func TestLedgerSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var l ledger
		for range rng.IntN(300) {
			switch rng.IntN(20) {
			case 0:
				l.prune(rng.Int64N(5_000))
			case 1:
				l.takeOldest(rng.Int64N(5))
			case 2:
				var e encoder
				e.ledger(&l)
				d := decoder{b: e.b}
				l = ledger{}
				d.ledger(&l)
				require.NoError(t, d.err)
			default:
				l.addUpTo(rng.Int64N(10_000), 1+rng.Int64N(3), rng.Int64N(50), 1+rng.IntN(64))
			}
		}
		for j := 1; j < len(l.e); j++ {
			require.LessOrEqual(t, l.e[j-1].at, l.e[j].at, "in order")
		}
		var all int64
		for _, e := range l.e {
			all += e.n
		}
		require.Equal(t, all, l.total())
		for range 50 {
			from, to := rng.Int64N(12_000)-1_000, rng.Int64N(12_000)-1_000
			var want int64
			for _, e := range l.e {
				if e.at > from && e.at <= to {
					want += e.n
				}
			}
			require.Equal(t, want, l.sum(from, to), "(%d, %d] of %v", from, to, l.e)
		}
	}
}

// BenchmarkLedgerFull: adding to a full ledger costs O(1) amortized.
func BenchmarkLedgerFull(b *testing.B) {
	var l ledger
	at := int64(0)
	for b.Loop() {
		at += 1000
		l.addUpTo(at, 1, 1, maxSilentLedger)
	}
}

// TestNthSmallest: nthSmallest finds what sorting finds, for every k, in
// slices with repeats, runs in order and in reverse, and random ones.
func TestNthSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		n := 1 + rng.IntN(200)
		v := make([]int64, n)
		for i := range v {
			switch rng.IntN(4) {
			case 0:
				v[i] = int64(i) // ascending
			case 1:
				v[i] = int64(n - i) // descending
			case 2:
				v[i] = 7 // repeats
			default:
				v[i] = rng.Int64N(50)
			}
		}
		sorted := slices.Sorted(slices.Values(v))
		for k := range n {
			require.Equal(t, sorted[k], nthSmallest(slices.Clone(v), k), "k=%d of %v", k, v)
		}
	}
}

// BenchmarkLedgerFullJittered: BenchmarkLedgerFull with the gaps between
// adds drawn at random, as a silent server's answers come (equal gaps are a
// sort's best case).
func BenchmarkLedgerFullJittered(b *testing.B) {
	var l ledger
	rng := rand.New(rand.NewPCG(1, 2))
	at := int64(0)
	for b.Loop() {
		at += 1 + rng.Int64N(2000)
		l.addUpTo(at, 1, 1, maxSilentLedger)
	}
}
