package headway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// replayer hands out the request body for each attempt: the caller's own
// body first, then fresh copies from req.GetBody, or from a bounded buffer
// when the caller opted into buffering. A body that cannot be produced again
// makes the request non-replayable, and it is then never retried.
type replayer struct {
	req        *http.Request
	buf        []byte // the buffered body, when buffering applied
	buffered   bool
	first      io.ReadCloser
	replayable bool
}

// newReplayer prepares req's body. limit > 0 allows reading a body without
// GetBody into memory, up to limit bytes; a longer body is sent as it is,
// and the request is not retried.
func newReplayer(req *http.Request, limit int64) (replayer, error) {
	r := replayer{req: req, first: req.Body}
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		r.replayable = true
	case req.GetBody != nil:
		r.replayable = true
	case limit > 0:
		buf, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
		if err != nil {
			req.Body.Close()
			return replayer{}, fmt.Errorf("headway: buffering request body: %w", err)
		}
		if int64(len(buf)) <= limit {
			req.Body.Close()
			r.buf, r.buffered, r.replayable = buf, true, true
			r.first = io.NopCloser(bytes.NewReader(buf))
		} else {
			r.first = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(buf), req.Body), req.Body}
		}
	}
	return r, nil
}

// body returns the body for attempt n (from 1).
func (r *replayer) body(n int) (io.ReadCloser, error) {
	if n == 1 || r.req.Body == nil || r.req.Body == http.NoBody {
		return r.first, nil
	}
	if r.buffered {
		return io.NopCloser(bytes.NewReader(r.buf)), nil
	}
	b, err := r.req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("headway: rewinding request body with GetBody: %w", err)
	}
	return b, nil
}

// closeFirst closes the caller's body when the request is refused before
// its first attempt.
func (r *replayer) closeFirst() {
	if r.first != nil {
		r.first.Close()
	}
}
