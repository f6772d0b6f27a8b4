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

	"github.com/headway-go/headway"
)

// Report is the JSON form of a headway.Observation. Unknown values are null.
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

// Policy is the JSON form of a headway.Policy.
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
func FromObservation(obs headway.Observation, hasStatus bool) Report {
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
			jp.Unit = string(headway.UnitRequests)
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
	obs := headway.ParseHeaders(head.Header, head.Status, received)
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
	br := bufio.NewReader(io.LimitReader(r, MaxHeadBytes))
	h := Head{Header: http.Header{}}
	var (
		last    string // the canonical key of the last header line
		started bool
		indent  string // of the first line, stripped from every line
	)
	for {
		line, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return Head{}, fmt.Errorf("reading the response head: %w", err)
		}
		eof := err != nil
		line = strings.TrimRight(line, "\r\n")
		if indent == "" && !started && strings.TrimSpace(line) != "" {
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		}
		line = strings.TrimPrefix(line, indent)
		if isCurlNoise(line) {
			line = "x" // neither blank nor a header: ignored below
		}
		line = strings.TrimPrefix(line, "< ")
		switch {
		case strings.TrimSpace(line) == "":
			interim := h.HasStatus && (h.Status < 200 || h.Status >= 300 && h.Status < 400)
			if started && !(interim && nextIsHead(br)) {
				return h, nil
			}
			if started { // a 1xx or a redirect: the head that follows is later
				h, last, started = Head{Header: http.Header{}}, "", false
			}
		case !started && isStatusLine(line):
			started = true
			h.Status, h.HasStatus = parseStatusLine(line)
		case (line[0] == ' ' || line[0] == '\t') && last != "":
			vs := h.Header[last]
			vs[len(vs)-1] = strings.TrimSpace(vs[len(vs)-1] + " " + strings.TrimSpace(line))
		default:
			name, value, ok := strings.Cut(line, ":")
			if strings.HasPrefix(line, ":") { // ":status: 429"
				name, value, ok = strings.Cut(line[1:], ":")
				if ok && strings.EqualFold(strings.TrimSpace(name), "status") {
					if code, err := strconv.Atoi(strings.TrimSpace(value)); err == nil && code >= 100 && code <= 999 {
						h.Status, h.HasStatus, started = code, true, true
					}
				}
				break
			}
			name = strings.TrimSpace(name)
			if !ok || !isToken(name) {
				last = "" // not a header line: ignored
				break
			}
			started = true
			last = textproto.CanonicalMIMEHeaderKey(name)
			h.Header[last] = append(h.Header[last], strings.Trim(value, " \t"))
		}
		if eof {
			if !started {
				return Head{}, ErrNoHead
			}
			return h, nil
		}
	}
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

// isToken reports whether s is an RFC 9110 token, as header names are.
func isToken(s string) bool {
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

// nextIsHead reports whether the next non-blank line starts a status line,
// without consuming it.
func nextIsHead(br *bufio.Reader) bool {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return false
		}
		if b[0] != '\r' && b[0] != '\n' {
			break
		}
		br.ReadByte() //nolint:errcheck // the byte was just peeked
	}
	b, _ := br.Peek(len("< HTTP/"))
	return isStatusLine(strings.TrimPrefix(string(b), "< "))
}
