package headway

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
)

// Wrapping a headway transport again replaces its layers (unwrapLayers),
// but a transport of someone else's between the two (a logger, an
// OpenTelemetry wrapper) hides the inner one: a GET answered 503 then
// reached the server 16 times, and Stats counted 20 attempts. So the top
// of a headway stack whose base is not a plain *http.Transport marks the
// requests it sends, in their context, with the layers it applies; a
// headway stack further down lets those layers of its own pass the request
// through (one retry loop, one pacer, one count per attempt), and says it
// was there. Marking costs a context and a shallow copy of the request, so
// a stack marks only while it has not learnt whether one hides below: its
// first request, about one in markEvery after, and every one once a stack below
// has said it is there.

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
	// below is set by a headway stack below that saw the marker. A
	// marker merged from two stacks' (mark) has the upper one's in above
	// and its own stack's in self, which learn it too.
	below atomic.Bool
	// pacedBelow is set by a headway stack below that retries, and paces
	// its attempts, where this one does not retry: pacing here would only
	// hold its retry loop as a whole, so this stack's pacer lets the
	// requests through once it knows.
	pacedBelow atomic.Bool
	above      *marker
	self       *marker
	started    atomic.Bool // the stack has marked a request
}

// markEvery is how often a stack that has seen no headway stack below
// marks a request all the same: a transport of someone else's may route
// some requests only (a host's) through one. Which requests is drawn at
// random (math/rand/v2's generator, which each thread keeps on its own),
// not counted: a count would be a write that every request of the stack,
// on every core, makes to one cache line.
const markEvery = 1024

// markerFrom returns the marker of a headway stack above, or nil.
func markerFrom(ctx context.Context) *marker {
	m, _ := ctx.Value(layersKey{}).(*marker)
	return m
}

// applied reports whether a headway stack other than c's, above it,
// already applies layer l to the request, and tells those stacks that one
// is below them.
func applied(ctx context.Context, c *config, l layerSet) bool {
	m := markerFrom(ctx)
	if m == nil || m.owner == c {
		return false
	}
	setAbove(m, func(x *marker) *atomic.Bool { return &x.below })
	return m.layers&l != 0
}

// pacesBelow tells the headway stacks above, whose marker is in ctx, that
// a retry loop below paces its attempts.
func pacesBelow(ctx context.Context) {
	setAbove(markerFrom(ctx), func(x *marker) *atomic.Bool { return &x.pacedBelow })
}

// setAbove sets the flag that flag picks in m, in every marker above it,
// and in the stacks' own markers they were merged from.
func setAbove(m *marker, flag func(*marker) *atomic.Bool) {
	for a := m; a != nil; a = a.above {
		for _, x := range [2]*marker{a, a.self} {
			if x != nil && !flag(x).Load() {
				flag(x).Store(true)
			}
		}
	}
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

// mark returns req with m in its context (merged with a marker from above)
// when it is to be marked (see markEvery), or req itself.
func mark(req *http.Request, m *marker) *http.Request {
	if m == nil || !m.below.Load() && m.started.Load() && rand.Uint64()%markEvery != 0 {
		return req
	}
	if !m.started.Load() {
		m.started.Store(true)
	}
	ctx := req.Context()
	if above := markerFrom(ctx); above != nil {
		m = &marker{owner: m.owner, layers: above.layers | m.layers, above: above, self: m}
		m.below.Store(true) // nothing to learn of this copy
	}
	return req.WithContext(context.WithValue(ctx, layersKey{}, m))
}
