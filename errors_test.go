package headway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/internal/decide"
)

// TestReasonsAgree: the exported reasons have the values of the decisions'
// codes, which the retry loop converts with Reason(code).
func TestReasonsAgree(t *testing.T) {
	for r, code := range map[Reason]int{
		ReasonAttemptsExhausted: decide.AttemptsExhausted,
		ReasonWaitTooLong:       decide.WaitTooLong,
		ReasonDeadline:          decide.Deadline,
		ReasonServerDeclined:    decide.ServerDeclined,
		ReasonBodyNotReplayable: decide.BodyNotReplayable,
		ReasonBudgetExhausted:   decide.BudgetExhausted,
		ReasonCanceled:          decide.Canceled,
		ReasonOverloaded:        decide.Overloaded,
	} {
		require.Equal(t, code, int(r), r.String())
		require.NotContains(t, r.String(), "Reason(", "every reason has words")
	}
}
