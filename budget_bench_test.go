package headway

import "testing"

// BenchmarkRetryBudgetDeposit: every request deposits into its key's
// retry budget, which is full on the hot path; in parallel, as a client's
// requests do.
func BenchmarkRetryBudgetDeposit(b *testing.B) {
	budget := NewRetryBudget(DefaultBudgetRatio, DefaultBudgetReserve)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			budget.Deposit("api.example.com")
		}
	})
}
