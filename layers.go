package headway

import (
	"context"
	"net/http"
)

// Wrapping a headway transport again replaces its layers (unwrapLayers),
// but a transport of someone else's between the two (a logger, an
// OpenTelemetry wrapper) hides the inner one: a GET answered 503 then
// reached the server 16 times, and Stats counted 20 attempts. So the top
// of a headway stack whose base is not a plain *http.Transport marks the
// requests it sends, in their context, with the layers it applies; a
// headway stack further down lets those layers of its own pass the request
// through: one retry loop, one pacer, one count per attempt.

// layerSet is a set of headway layers.
type layerSet uint8

const (
	retryLayer layerSet = 1 << iota
	paceLayer
)

// layersKey is the context key of a *marker.
type layersKey struct{}

// marker says which layers a headway stack above applies; owner is that
// stack's config, so that its own layers do not skip themselves.
type marker struct {
	owner  *config
	layers layerSet
}

// markerFrom returns the marker of a headway stack above, or nil.
func markerFrom(ctx context.Context) *marker {
	m, _ := ctx.Value(layersKey{}).(*marker)
	return m
}

// applied reports whether a headway stack other than c's, above it,
// already applies layer l to the request.
func applied(ctx context.Context, c *config, l layerSet) bool {
	m := markerFrom(ctx)
	return m != nil && m.owner != c && m.layers&l != 0
}

// layersOf returns the layers c applies.
func layersOf(c *config) layerSet {
	var s layerSet
	if c.retry {
		s |= retryLayer
	}
	if c.pace {
		s |= paceLayer
	}
	return s
}

// newMarker returns the marker c's stack puts on its requests, or nil when
// base is a plain *http.Transport (which hides no headway stack: nothing to
// mark, and nothing to pay for it).
func newMarker(c *config, base http.RoundTripper) *marker {
	if _, plain := unwrapLayers(base).(*http.Transport); plain {
		return nil
	}
	return &marker{owner: c, layers: layersOf(c)}
}

// mark returns req with m in its context (merged with a marker from above),
// or req itself when m is nil.
func mark(req *http.Request, m *marker) *http.Request {
	if m == nil {
		return req
	}
	ctx := req.Context()
	if above := markerFrom(ctx); above != nil && above.layers|m.layers != m.layers {
		m = &marker{owner: m.owner, layers: above.layers | m.layers}
	}
	return req.WithContext(context.WithValue(ctx, layersKey{}, m))
}
