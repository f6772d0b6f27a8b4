package ratelimit

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCanonicalField: the fast lookup of canonical names finds exactly the
// field the folding lookup finds, for every name in every spelling, and
// nothing else.
func TestCanonicalField(t *testing.T) {
	for name, want := range fieldByName {
		canon := http.CanonicalHeaderKey(name)
		got, ok := canonicalField(canon)
		require.True(t, ok, canon)
		require.Equal(t, want, got, canon)
		for _, spelling := range []string{name, strings.ToUpper(name), canon} {
			if f, ok := canonicalField(spelling); ok {
				require.Equal(t, canon, spelling, "only the canonical spelling is matched exactly")
				lf, lok := lookupField(spelling)
				require.True(t, lok)
				require.Equal(t, lf, f)
			}
		}
	}
	for _, other := range []string{"", "Date ", "Content-Type", "X-Ratelimit", "Ratelimit-Policies", "X-Ratelimit-Limit-Requests"} {
		_, ok := canonicalField(other)
		require.False(t, ok, other)
	}
}
