package headway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMarkSamples: a stack whose base may hide another headway stack marks
// its first request, then about one in markEvery, drawn at random rather
// than counted (a count is a write to one cache line that every request of
// the stack makes), and every request once a stack below said it is there;
// a stack that has no marker (a plain *http.Transport base) marks none.
func TestMarkSamples(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://api.example/items", nil)
	marked := func(r *http.Request) bool { return markerFrom(r.Context()) != nil }
	require.Same(t, req, mark(req, nil))

	m := &marker{layers: retryLayer | paceLayer}
	require.True(t, marked(mark(req, m)), "the first request")
	n := 0
	for range 100 * markEvery {
		if marked(mark(req, m)) {
			n++
		}
	}
	// Binomially about 100, give or take 10.
	require.InDelta(t, 100, n, 40, "marked %d of %d", n, 100*markEvery)

	m.below.Store(true)
	for range 10 {
		require.True(t, marked(mark(req, m)), "once a stack below is known")
	}
}
