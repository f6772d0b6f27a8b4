package otelheadway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/headway-go/headway"
	"github.com/headway-go/headway/otelheadway"
)

// collect reads every metric the reader holds, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func sum(t *testing.T, a metricdata.Aggregation, attr ...string) int64 {
	t.Helper()
	s, ok := a.(metricdata.Sum[int64])
	require.True(t, ok, "%T", a)
	var n int64
	for _, dp := range s.DataPoints {
		match := true
		for i := 0; i+1 < len(attr); i += 2 {
			v, ok := dp.Attributes.Value(attributeKey(attr[i]))
			match = match && ok && v.AsString() == attr[i+1]
		}
		if match {
			n += dp.Value
		}
	}
	return n
}

// TestMetrics: against a server that refuses every other request with 429
// and Retry-After, then fails one with 503, the instruments count what
// headway did.
func TestMetrics(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"burst";q=100;w=60`)
		w.Header().Set("RateLimit", `"burst";r=42;t=30`)
		switch n.Add(1) {
		case 1, 3:
			w.Header().Set("Retry-After-Ms", "10")
			w.WriteHeader(http.StatusTooManyRequests)
		case 5:
			w.WriteHeader(http.StatusNotImplemented)
		}
	}))
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	opts, err := otelheadway.Options(mp)
	require.NoError(t, err)
	client := headway.Wrap(srv.Client(), append(opts, headway.WithBackoffDelays(time.Millisecond, 10*time.Millisecond))...)
	for range 3 {
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		resp.Body.Close()
	}
	m := collect(t, reader)
	key := srv.Listener.Addr().String()
	require.EqualValues(t, 3, sum(t, m["headway.requests"], "headway.key", key))
	require.EqualValues(t, 2, sum(t, m["headway.requests"], "headway.outcome", "ok"))
	require.EqualValues(t, 1, sum(t, m["headway.requests"], "headway.outcome", "http_error"))
	require.EqualValues(t, 5, sum(t, m["headway.attempts"]))
	require.EqualValues(t, 2, sum(t, m["headway.attempts"], "http.response.status_class", "429"))
	require.EqualValues(t, 2, sum(t, m["headway.throttled"]))
	require.EqualValues(t, 2, sum(t, m["headway.retries"], "headway.reason", "throttled"))

	h, ok := m["headway.wait"].(metricdata.Histogram[float64])
	require.True(t, ok)
	var waits uint64
	for _, dp := range h.DataPoints {
		waits += dp.Count
	}
	require.GreaterOrEqual(t, waits, uint64(2), "each retry's wait is recorded")

	g, ok := m["headway.quota.remaining"].(metricdata.Gauge[int64])
	require.True(t, ok)
	require.Len(t, g.DataPoints, 1)
	require.EqualValues(t, 42, g.DataPoints[0].Value)
	v, _ := g.DataPoints[0].Attributes.Value("headway.policy")
	require.Equal(t, "burst", v.AsString())
}

func TestOptionsRefusesNil(t *testing.T) {
	_, err := otelheadway.Options(nil)
	require.Error(t, err)
}

func attributeKey(s string) attribute.Key { return attribute.Key(s) }
