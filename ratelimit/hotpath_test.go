package ratelimit

import (
	"net/http"
	"strconv"
	"testing"
)

// hotHeader is what the overhead benchmarks' in-memory server sends on
// every response: IETF draft-08 and X-RateLimit-* fields, with a Date.
func hotHeader() http.Header {
	return http.Header{
		"Date":                  {"Wed, 25 Nov 2026 21:32:42 GMT"},
		"Content-Type":          {"application/json"},
		"Ratelimit-Policy":      {`"default";q=1000;w=60`},
		"Ratelimit":             {`"default";r=999;t=30`},
		"X-Ratelimit-Limit":     {"1000"},
		"X-Ratelimit-Remaining": {"999"},
		"X-Ratelimit-Reset":     {"30"},
	}
}

// BenchmarkParseHot: ParseHeaders on the hot path's response, the same
// every time, and with its remaining counts changing as a real server's do.
func BenchmarkParseHot(b *testing.B) {
	b.Run("same", func(b *testing.B) {
		h := hotHeader()
		b.ReportAllocs()
		for b.Loop() {
			if obs := ParseHeaders(h, 200, hdrNow); len(obs.Policies) != 1 {
				b.Fatal(obs)
			}
		}
	})
	b.Run("changing", func(b *testing.B) {
		hs := make([]http.Header, 1000)
		for i := range hs {
			hs[i] = hotHeader()
			r := strconv.Itoa(999 - i)
			hs[i]["Ratelimit"] = []string{`"default";r=` + r + `;t=30`}
			hs[i]["X-Ratelimit-Remaining"] = []string{r}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if obs := ParseHeaders(hs[i%len(hs)], 200, hdrNow); len(obs.Policies) != 1 {
				b.Fatal(obs)
			}
			i++
		}
	})
}
