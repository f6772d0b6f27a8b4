package headway

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRoutesMatch: a pattern selects what http.ServeMux would route to it,
// host without its port included, and nothing ServeMux answers with a
// handler of its own: "/uploads" is redirected to a subtree
// "/uploads/", not in it.
func TestRoutesMatch(t *testing.T) {
	r := newRoutes("api.example.com/uploads/", "POST /v1/{id}")
	for _, c := range []struct {
		method, url string
		want        bool
	}{
		{"GET", "https://api.example.com/uploads/a", true},
		{"GET", "https://api.example.com:8443/uploads/", true},
		{"GET", "https://api.example.com/uploads", false},
		{"GET", "https://other.example.com/uploads/a", false},
		{"POST", "https://any.example.com/v1/7", true},
		{"GET", "https://any.example.com/v1/7", false},
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		require.NoError(t, err)
		require.Equal(t, c.want, r.match(req), "%s %s", c.method, c.url)
	}
	require.True(t, routes{}.match(&http.Request{}), "no pattern selects every request")
}
