package bench

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// Transport is an in-memory http.RoundTripper: it reads and closes each
// request's body, and answers with a canned response (status, header, a
// small body) without any I/O, so that a benchmark over it measures only the
// client stacked on top. Each response gets its own copy of the header and
// its own body, as from a real transport. It is safe for concurrent use.
type Transport struct {
	header http.Header
	body   string

	failN      int64 // the first failN responses have status failStatus
	failStatus int

	requests  atomic.Int64 // requests seen
	bodyBytes atomic.Int64 // request body bytes read
	open      atomic.Int64 // response bodies handed out and not yet closed
}

// ResponseBody is the body of every 200 from a Transport.
const ResponseBody = `{"id":42,"name":"widget","ok":true}`

// NewTransport returns a Transport whose responses carry header (and a
// Content-Length) and ResponseBody.
func NewTransport(header http.Header) *Transport {
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Length", strconv.Itoa(len(ResponseBody)))
	return &Transport{header: h, body: ResponseBody}
}

// FailFirst makes the first n responses have the given status (and an
// empty body), for tests of retries. Call it before the first request.
func (t *Transport) FailFirst(n int, status int) *Transport {
	t.failN, t.failStatus = int64(n), status
	return t
}

// Requests returns how many requests t has answered.
func (t *Transport) Requests() int64 { return t.requests.Load() }

// BodyBytes returns how many request body bytes t has read in all.
func (t *Transport) BodyBytes() int64 { return t.bodyBytes.Load() }

// Open returns how many response bodies t handed out that are not closed.
func (t *Transport) Open() int64 { return t.open.Load() }

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		n, err := io.Copy(io.Discard, req.Body)
		req.Body.Close()
		t.bodyBytes.Add(n)
		if err != nil {
			return nil, err
		}
	}
	status, body := http.StatusOK, t.body
	if n := t.requests.Add(1); n <= t.failN {
		status, body = t.failStatus, ""
	}
	header := t.header.Clone()
	if body == "" {
		header["Content-Length"] = []string{"0"}
	}
	t.open.Add(1)
	return &http.Response{
		Status:        statusLine(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          &respBody{s: body, t: t},
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

var statusOK = "200 OK"

func statusLine(code int) string {
	if code == http.StatusOK {
		return statusOK
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// respBody is a response body read from a string, counting its close.
type respBody struct {
	s      string
	off    int
	t      *Transport
	closed atomic.Bool
}

func (b *respBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errBodyClosed
	}
	if b.off >= len(b.s) {
		return 0, io.EOF
	}
	n := copy(p, b.s[b.off:])
	b.off += n
	return n, nil
}

func (b *respBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.t.open.Add(-1)
	}
	return nil
}

var errBodyClosed = errors.New("bench: read on closed response body")
