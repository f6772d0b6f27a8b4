package ratelimittest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	rlt "github.com/headway-go/headway/ratelimittest"
)

// discardWriter is a ResponseWriter that keeps nothing but its header map,
// cleared between requests, so the benchmark measures the limiter.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkHandler is one decision and its headers per request, with ample
// quota (the common case) and with the quota spent (every request refused).
func BenchmarkHandler(b *testing.B) {
	api := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, alg := range rlt.Algorithms() {
		for _, spent := range []bool{false, true} {
			name := string(alg) + "/ample"
			limit := 1 << 20
			if spent {
				name, limit = string(alg)+"/refused", 1
			}
			b.Run(name, func(b *testing.B) {
				clock := rlt.NewManualClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
				h, err := rlt.NewHandler(api, rlt.WithClock(clock), rlt.WithAdmissionLog(0),
					rlt.WithQuota(rlt.Quota{Algorithm: alg, Limit: limit, Window: time.Hour}))
				if err != nil {
					b.Fatal(err)
				}
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				w := &discardWriter{h: http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					clear(w.h)
					h.ServeHTTP(w, req)
				}
			})
		}
	}
}
