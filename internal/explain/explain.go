// Package explain reads a raw HTTP response head and describes, as JSON,
// what headway makes of its rate-limit headers. It is the engine of
// `ratecurl -explain`, and the golden tests of the header dialects use it
// too, so that the command and the tests cannot disagree.
package explain

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/headway-go/headway/ratelimit"
)

// Report is the JSON form of a ratelimit.Observation. Unknown values are null.
type Report struct {
	// Status is the status code of the head's status line; null when the
	// input had none (headers only).
	Status *int `json:"status"`
	// Dialects are the names of the header formats recognised.
	Dialects []string `json:"dialects"`
	// RetryAfterSeconds is the server's Retry-After (or its millisecond
	// variants), relative to the Date header; null when absent or invalid.
	RetryAfterSeconds *float64 `json:"retry_after_seconds"`
	// Policies are the quotas the server announced.
	Policies []Policy `json:"policies"`
}

// Policy is the JSON form of a ratelimit.Policy.
type Policy struct {
	Name          *string  `json:"name"`
	Limit         *int64   `json:"limit"`
	Remaining     *int64   `json:"remaining"`
	WindowSeconds *float64 `json:"window_seconds"`
	ResetSeconds  *float64 `json:"reset_seconds"`
	Unit          string   `json:"unit"`
}

// FromObservation converts an observation into its report. status is
// reported as null when hasStatus is false.
func FromObservation(obs ratelimit.Observation, hasStatus bool) Report {
	r := Report{Dialects: []string{}, Policies: []Policy{}}
	if hasStatus {
		r.Status = ptr(obs.Status)
	}
	for _, d := range obs.Dialects.List() {
		r.Dialects = append(r.Dialects, d.String())
	}
	if obs.HasRetryAfter {
		r.RetryAfterSeconds = ptr(obs.RetryAfter.Seconds())
	}
	for _, p := range obs.Policies {
		jp := Policy{Unit: string(p.Unit)}
		if jp.Unit == "" {
			jp.Unit = string(ratelimit.UnitRequests)
		}
		if p.Name != "" {
			jp.Name = ptr(p.Name)
		}
		if p.HasLimit {
			jp.Limit = ptr(p.Limit)
		}
		if p.HasRemaining {
			jp.Remaining = ptr(p.Remaining)
		}
		if p.Window > 0 {
			jp.WindowSeconds = ptr(p.Window.Seconds())
		}
		if p.HasReset {
			jp.ResetSeconds = ptr(p.Reset.Seconds())
		}
		r.Policies = append(r.Policies, jp)
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// Explain reads one response head from r and reports what its headers say.
// received stands for the time the response arrived: it is used only when
// the head has no valid Date header.
func Explain(r io.Reader, received time.Time) (Report, error) {
	head, err := ReadHead(r)
	if err != nil {
		return Report{}, err
	}
	obs := ratelimit.ParseHeaders(head.Header, head.Status, received)
	return FromObservation(obs, head.HasStatus), nil
}

// Head is a parsed response head.
type Head struct {
	Status    int
	HasStatus bool
	Header    http.Header
}

// MaxHeadBytes bounds the input ReadHead reads.
const MaxHeadBytes = 1 << 20

// ErrNoHead is returned by ReadHead when the input holds no header line and
// no status line.
var ErrNoHead = errors.New("no response head in the input")

// ReadHead reads a raw response head: a status line ("HTTP/1.1 429 Too Many
// Requests", "HTTP/2 429") and header lines, ended by a blank line or the
// end of the input, with CRLF or LF line ends. It is lenient, as a tool fed
// with pasted text should be:
//   - leading blank lines are skipped, the indentation of the first line is
//     removed from every line (a head pasted from indented text), and so
//     are curl -v's "< " prefixes
//     and the lines of its transcript that are not the response's ("> ",
//     "* ");
//   - a 1xx or 3xx head followed by another head (curl -i with 100
//     Continue, curl -iL following redirects) gives the later one;
//   - an HTTP/2 ":status" pseudo-header sets the status;
//   - a line that is not "name: value" with a token for a name is ignored,
//     a line starting with a space or tab continues the previous value
//     (obsolete folding);
//   - the input may hold headers only, with no status line.
//
// Anything after the blank line that ends the head (a body) is not read.
func ReadHead(r io.Reader) (Head, error) {
	rd := headReader{br: bufio.NewReader(io.LimitReader(r, MaxHeadBytes)), h: newHead()}
	return rd.read()
}

func newHead() Head { return Head{Header: http.Header{}} }

// headReader is ReadHead's state.
type headReader struct {
	br      *bufio.Reader
	h       Head  // the head being read
	started bool  // h has a status line or a header line
	interim *Head // a finished 1xx or 3xx head, kept unless another head follows
	indent  string
	last    string          // the canonical key of the last header line
	fold    strings.Builder // continuation lines of last's value, not yet joined
}

func (rd *headReader) read() (Head, error) {
	for {
		line, err := rd.br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return Head{}, fmt.Errorf("reading the response head: %w", err)
		}
		if done, h := rd.line(strings.TrimRight(line, "\r\n")); done {
			return nonEmpty(h)
		}
		if err != nil { // the end of the input
			rd.flushFold()
			switch {
			case rd.started:
				return nonEmpty(rd.h)
			case rd.interim != nil:
				return nonEmpty(*rd.interim)
			}
			return Head{}, ErrNoHead
		}
	}
}

// nonEmpty returns h, or ErrNoHead when it has neither a status nor a
// header (a status line too garbled to read, and nothing else).
func nonEmpty(h Head) (Head, error) {
	if !h.HasStatus && len(h.Header) == 0 {
		return Head{}, ErrNoHead
	}
	return h, nil
}

// line reads one line; done is true when the head is complete.
func (rd *headReader) line(line string) (done bool, h Head) {
	if rd.indent == "" && !rd.started && strings.TrimSpace(line) != "" {
		rd.indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	}
	line = strings.TrimPrefix(line, rd.indent)
	if isCurlNoise(line) {
		return false, Head{}
	}
	line = strings.TrimPrefix(line, "< ")
	blank := strings.TrimSpace(line) == ""
	if !blank && (line[0] == ' ' || line[0] == '\t') && rd.last != "" {
		rd.fold.WriteByte(' ')
		rd.fold.WriteString(strings.TrimSpace(line))
		return false, Head{}
	}
	rd.flushFold()
	switch {
	case blank:
		if !rd.started {
			return false, Head{} // leading blank lines
		}
		if s := rd.h.Status; rd.h.HasStatus && (s < 200 || s >= 300 && s < 400) {
			// A 1xx or a redirect: another head may follow (curl -i, -iL).
			h := rd.h
			rd.interim, rd.h, rd.started, rd.last = &h, newHead(), false, ""
			return false, Head{}
		}
		return true, rd.h
	case isStatusLine(line) && !rd.started:
		rd.interim, rd.started = nil, true
		rd.h.Status, rd.h.HasStatus = parseStatusLine(line)
		return false, Head{}
	case strings.HasPrefix(line, ":"): // HTTP/2's ":status: 429"
		name, value, ok := strings.Cut(line[1:], ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "status") {
			if code, err := strconv.Atoi(strings.TrimSpace(value)); err == nil && code >= 100 && code <= 999 {
				rd.interim, rd.started = nil, true
				rd.h.Status, rd.h.HasStatus = code, true
			}
		}
		return false, Head{}
	}
	name, value, ok := strings.Cut(line, ":")
	name = strings.TrimSpace(name)
	if !ok || !IsToken(name) {
		rd.last = ""
		if rd.interim != nil && !rd.started {
			return true, *rd.interim // the interim head's body: no head follows
		}
		return false, Head{} // not a header line: ignored
	}
	if rd.interim != nil && !rd.started {
		return true, *rd.interim // a header line where a status line was due
	}
	rd.started = true
	rd.last = textproto.CanonicalMIMEHeaderKey(name)
	rd.h.Header[rd.last] = append(rd.h.Header[rd.last], strings.Trim(value, " \t"))
	return false, Head{}
}

// flushFold joins pending continuation lines to the value they continue.
func (rd *headReader) flushFold() {
	if rd.fold.Len() == 0 || rd.last == "" {
		rd.fold.Reset()
		return
	}
	vs := rd.h.Header[rd.last]
	vs[len(vs)-1] = strings.TrimSpace(vs[len(vs)-1] + rd.fold.String())
	rd.fold.Reset()
}

// isCurlNoise reports whether a line of a curl -v transcript is not part of
// the response head: request lines ("> GET / HTTP/1.1", "> Host: ..."),
// informational lines ("* Connected to ...") and data markers ("{ [5 bytes").
func isCurlNoise(line string) bool {
	switch {
	case line == ">" || line == "*" || line == "{" || line == "}":
		return true
	case len(line) >= 2 && line[1] == ' ':
		return strings.IndexByte(">*{}", line[0]) >= 0
	}
	return false
}

// IsToken reports whether s is an RFC 9110 token, as header names and
// methods are.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func isStatusLine(line string) bool {
	return len(line) >= 5 && strings.EqualFold(line[:5], "HTTP/")
}

// parseStatusLine reads the code of "HTTP/1.1 429 Too Many Requests".
func parseStatusLine(line string) (int, bool) {
	fields := strings.Fields(line)
	if len(fields) < 2 || len(fields[1]) != 3 {
		return 0, false
	}
	code, err := strconv.Atoi(fields[1])
	if err != nil || code < 100 {
		return 0, false
	}
	return code, true
}
