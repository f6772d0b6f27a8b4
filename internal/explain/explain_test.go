package explain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/headway-go/headway/internal/explain"
	"github.com/headway-go/headway/ratelimit"
	"github.com/stretchr/testify/require"
)

// readers returns the ways each ReadHead input is fed: whole, one byte at a
// time and half a buffer at a time, so that line ends and the look-ahead
// after a 1xx head never depend on where a Read happens to stop.
func readers(s string) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(s) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
}

func TestReadHead(t *testing.T) {
	type hdr = http.Header
	cases := []struct {
		name       string
		in         string
		status     int
		hasStatus  bool
		wantHeader http.Header
	}{
		{
			name:       "HTTP/1.1 status line with reason",
			in:         "HTTP/1.1 429 Too Many Requests\nRetry-After: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "indented paste: the first line's indentation is removed from all",
			in:         "  HTTP/1.1 429 Too Many Requests\n  Retry-After: 5\n  X-Long: a\n     continued\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}, "X-Long": {"a continued"}},
		},
		{
			name:       "tab-indented paste",
			in:         "\tHTTP/2 200\n\tratelimit: \"a\";r=1\n\n\tbody\n",
			status:     200,
			hasStatus:  true,
			wantHeader: hdr{"Ratelimit": {`"a";r=1`}},
		},
		{
			name:       "HTTP/2 status line without reason",
			in:         "HTTP/2 429\nretry-after: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "HTTP/2 status line with trailing space (curl)",
			in:         "HTTP/2 429 \r\nretry-after: 5\r\n\r\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "lower-case protocol",
			in:         "http/1.1 503 Service Unavailable\nRetry-After: 5\n",
			status:     503,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "status line only, no line end",
			in:         "HTTP/1.1 429 Too Many Requests",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{},
		},
		{
			name:       "CRLF line ends",
			in:         "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nX-A: 1\r\n\r\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}, "X-A": {"1"}},
		},
		{
			name:       "LF line ends",
			in:         "HTTP/1.1 429 Too Many Requests\nRetry-After: 5\nX-A: 1\n\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}, "X-A": {"1"}},
		},
		{
			name:       "mixed CRLF and LF line ends",
			in:         "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\nX-A: 1\r\n\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}, "X-A": {"1"}},
		},
		{
			name:       "no blank line at the end",
			in:         "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "leading blank lines skipped",
			in:         "\n\r\n \t\r\nHTTP/1.1 429 Too Many Requests\nRetry-After: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "curl -v prefixes",
			in:         "< HTTP/2 429 \r\n< date: Thu, 14 Mar 2041 09:26:53 GMT\r\n< retry-after: 5\r\n< \r\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Date": {"Thu, 14 Mar 2041 09:26:53 GMT"}, "Retry-After": {"5"}},
		},
		{
			name:       "curl -v prefixes, the head's end then a body",
			in:         "< HTTP/1.1 429 Too Many Requests\n< X-A: 1\n< \n{\"x-b\": 2}\nX-C: 3\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name: "1xx head then the final head (curl -i)",
			in: "HTTP/1.1 100 Continue\r\n\r\n" +
				"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\n\r\nbody",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name: "1xx head's headers are dropped",
			in: "HTTP/1.1 103 Early Hints\nLink: </style.css>; rel=preload\nRetry-After: 99\n\n" +
				"HTTP/1.1 429 Too Many Requests\nRetry-After: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name: "two 1xx heads then the final head",
			in: "HTTP/1.1 100 Continue\n\n" +
				"HTTP/1.1 103 Early Hints\nLink: </a>\n\n" +
				"HTTP/1.1 503 Service Unavailable\nRetry-After: 5\n\nbody",
			status:     503,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name: "1xx head, extra blank lines, then the final head",
			in: "HTTP/1.1 100 Continue\r\n\r\n\r\n\n" +
				"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name: "1xx head then the final head, curl -v prefixes",
			in: "< HTTP/1.1 100 Continue\r\n< \r\n" +
				"< HTTP/1.1 429 Too Many Requests\r\n< Retry-After: 5\r\n< \r\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name: "redirects followed (curl -iL): the last head",
			in: "HTTP/1.1 301 Moved Permanently\nLocation: /v2\nRetry-After: 1\n\n" +
				"HTTP/2 429\nretry-after: 7\n\n{\"error\":1}\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"7"}},
		},
		{
			name: "curl -vL transcript: the head after the redirect",
			in: "< HTTP/1.1 301 M\n< Location: /x\n< \n* Issue another request to this URL: '/x'\n" +
				"> GET /x HTTP/1.1\n> Host: example.com\n> \n< HTTP/1.1 429 T\n< Retry-After: 5\n< \n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "indented redirect then the final head",
			in:         "    HTTP/1.1 301 M\n    Location: /x\n\n    HTTP/1.1 429 T\n    Retry-After: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "a redirect followed by its body: the redirect",
			in:         "HTTP/1.1 301 M\nRetry-After: 3\n\n<html>moved</html>\n",
			status:     301,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"3"}},
		},
		{
			name:       "many folded lines",
			in:         "HTTP/1.1 200 OK\nX: a\n" + strings.Repeat(" b\n", 3) + "Y: c\n",
			status:     200,
			hasStatus:  true,
			wantHeader: hdr{"X": {"a b b b"}, "Y": {"c"}},
		},
		{
			name:       "1xx head alone",
			in:         "HTTP/1.1 103 Early Hints\nLink: </a>\n\n",
			status:     103,
			hasStatus:  true,
			wantHeader: hdr{"Link": {"</a>"}},
		},
		{
			name:       "1xx head followed by a body, not a head",
			in:         "HTTP/1.1 103 Early Hints\nLink: </a>\n\nX-A: 1\n",
			status:     103,
			hasStatus:  true,
			wantHeader: hdr{"Link": {"</a>"}},
		},
		{
			name:       "a final head followed by a body that looks like a head",
			in:         "HTTP/1.1 200 OK\nX-A: 1\n\nHTTP/1.1 429 Too Many Requests\nX-B: 2\n",
			status:     200,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "HTTP/2 :status pseudo-header",
			in:         ":status: 429\nretry-after: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "HTTP/2 :status pseudo-header with curl -v prefix and spaces",
			in:         "< :status:  503 \r\n< retry-after: 5\r\n< \r\n",
			status:     503,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "HTTP/2 :status pseudo-header, not a number",
			in:         ":status: abc\nretry-after: 5\n",
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "other pseudo-headers are not headers",
			in:         ":status: 429\n:authority: example.com\n:path: /\nretry-after: 5\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"Retry-After": {"5"}},
		},
		{
			name:       "obs-fold continuation lines, space and tab",
			in:         "HTTP/1.1 429 Too Many Requests\nX-A: one\n   two\n\tthree  \nX-B: 1\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"one two three"}, "X-B": {"1"}},
		},
		{
			name:       "obs-fold continues the last of repeated values",
			in:         "X-A: 1\nX-A: 2\n 3\n",
			wantHeader: hdr{"X-A": {"1", "2 3"}},
		},
		{
			name:       "obs-fold continuing an empty value",
			in:         "X-A:\n  one\n",
			wantHeader: hdr{"X-A": {"one"}},
		},
		{
			name:       "lines without a colon ignored",
			in:         "HTTP/1.1 429 Too Many Requests\nnot a header\nX-A: 1\n-----\nX-B: 2\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"1"}, "X-B": {"2"}},
		},
		{
			name:       "a line whose name holds a space ignored",
			in:         "HTTP/1.1 429 Too Many Requests\nBad Name: x\n: no name\nX-A: 1\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "headers without a status line",
			in:         "RateLimit: \"burst\";r=0;t=30\nRetry-After: 5\n",
			wantHeader: hdr{"Ratelimit": {"\"burst\";r=0;t=30"}, "Retry-After": {"5"}},
		},
		{
			name:       "the body after the blank line is not read",
			in:         "HTTP/1.1 429 Too Many Requests\nX-A: 1\n\nX-B: 2\n{\"error\": \"slow down\"}\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "a blank line of spaces ends the head",
			in:         "HTTP/1.1 429 Too Many Requests\nX-A: 1\n  \t \nX-B: 2\n",
			status:     429,
			hasStatus:  true,
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "header values trimmed",
			in:         "X-A:   spaced \t \r\nX-B:tight\nX-C:\t\ttabbed\t\nX-D:  inner  space  \n",
			wantHeader: hdr{"X-A": {"spaced"}, "X-B": {"tight"}, "X-C": {"tabbed"}, "X-D": {"inner  space"}},
		},
		{
			name:       "a value keeps its colons",
			in:         "Date: Thu, 14 Mar 2041 09:26:53 GMT\nX-Url: http://example.com:8080/\n",
			wantHeader: hdr{"Date": {"Thu, 14 Mar 2041 09:26:53 GMT"}, "X-Url": {"http://example.com:8080/"}},
		},
		{
			name:       "an empty value kept",
			in:         "X-A:\nX-B:   \n",
			wantHeader: hdr{"X-A": {""}, "X-B": {""}},
		},
		{
			name:       "space between the name and the colon",
			in:         "X-A : 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "repeated headers keep every line in order",
			in:         "X-A: 1\nX-B: b\nx-a: 2\nX-A: 3, 4\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1", "2", "3, 4", "1"}, "X-B": {"b"}},
		},
		{
			name: "header names canonicalised",
			in:   "x-ratelimit-limit: 1\nRETRY-AFTER: 2\nratelimit-policy: 3\nX-RATELIMIT-RESET: 4\n",
			wantHeader: hdr{
				"X-Ratelimit-Limit": {"1"},
				"Retry-After":       {"2"},
				"Ratelimit-Policy":  {"3"},
				"X-Ratelimit-Reset": {"4"},
			},
		},
		{
			name:       "two-digit status code",
			in:         "HTTP/1.1 42 Odd\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "non-numeric status code",
			in:         "HTTP/1.1 abc Odd\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "four-digit status code",
			in:         "HTTP/1.1 4290 Odd\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "three-digit status code below 100",
			in:         "HTTP/1.1 099 Odd\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "signed status code",
			in:         "HTTP/1.1 +42 Odd\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
		{
			name:       "status line without a code",
			in:         "HTTP/1.1\nX-A: 1\n",
			wantHeader: hdr{"X-A": {"1"}},
		},
	}
	for _, c := range cases {
		for how, r := range readers(c.in) {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				h, err := explain.ReadHead(r())
				require.NoError(t, err)
				require.Equal(t, c.hasStatus, h.HasStatus, "HasStatus")
				require.Equal(t, c.status, h.Status, "Status")
				require.Equal(t, c.wantHeader, h.Header)
			})
		}
	}
}

func TestReadHeadNoHead(t *testing.T) {
	for _, in := range []string{
		"",
		"\n",
		"\r\n",
		"\n\r\n \t\n\r\n\n",
		"< \r\n< \r\n",
		"   ",
	} {
		for how, r := range readers(in) {
			t.Run(fmt.Sprintf("%q/%s", in, how), func(t *testing.T) {
				h, err := explain.ReadHead(r())
				require.ErrorIs(t, err, explain.ErrNoHead)
				require.Equal(t, explain.Head{}, h)
			})
		}
	}
}

// TestReadHeadTextOnlyIsNoHead is the documented contract of ErrNoHead: an
// input with no header line and no status line has no head.
func TestReadHeadTextOnlyIsNoHead(t *testing.T) {
	for _, in := range []string{
		"hello world\n",
		"just some text pasted by mistake",
		"{\"error\": \"rate limited\"}\n",
		"<html>\n<body>Too many requests</body>\n</html>\n",
	} {
		t.Run(in, func(t *testing.T) {
			_, err := explain.ReadHead(strings.NewReader(in))
			require.ErrorIs(t, err, explain.ErrNoHead)
		})
	}
}

// TestReadHeadStatusAfterIgnoredLines: lines without a colon are documented
// as ignored, so a status line after them is still the status line. This is
// what a whole curl -v transcript looks like: "*" and ">" lines first.
func TestReadHeadStatusAfterIgnoredLines(t *testing.T) {
	cases := map[string]string{
		"a stray line first": "pasted from the terminal\nHTTP/1.1 429 Too Many Requests\nRetry-After: 5\n",
		"a curl -v transcript": "* Host example.com:443 was resolved.\n" +
			"* Connected to example.com (93.184.215.14) port 443\n" +
			"> GET / HTTP/2\n> Host: example.com\n> User-Agent: curl/8.5.0\n> Accept: */*\n>\n" +
			"< HTTP/2 429 \n< retry-after: 5\n< \n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := explain.ReadHead(strings.NewReader(in))
			require.NoError(t, err)
			require.True(t, h.HasStatus)
			require.Equal(t, 429, h.Status)
			require.Equal(t, []string{"5"}, h.Header["Retry-After"])
		})
	}
}

// endless repeats line forever, counts what it has given, and fails (rather
// than hangs) once it has given far more than ReadHead may read.
type endless struct {
	line []byte
	off  int
	n    int
}

var errReadTooFar = errors.New("read far past MaxHeadBytes")

func (e *endless) Read(p []byte) (int, error) {
	if e.n > 4*explain.MaxHeadBytes {
		return 0, errReadTooFar
	}
	for i := range p {
		p[i] = e.line[e.off]
		e.off = (e.off + 1) % len(e.line)
	}
	e.n += len(p)
	return len(p), nil
}

func TestReadHeadStopsAtMaxHeadBytes(t *testing.T) {
	t.Run("endless header lines", func(t *testing.T) {
		src := &endless{line: []byte("X-A: b\r\n")}
		h, err := explain.ReadHead(io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\r\n"), src))
		require.NoError(t, err)
		require.True(t, h.HasStatus)
		require.Equal(t, 429, h.Status)
		require.LessOrEqual(t, src.n, explain.MaxHeadBytes, "bytes read from the input")
		vs := h.Header["X-A"]
		require.Greater(t, len(vs), explain.MaxHeadBytes/len(src.line)-10)
		require.LessOrEqual(t, len(vs), explain.MaxHeadBytes/len(src.line)+1)
		for _, v := range vs[:len(vs)-1] { // the last line may be cut short
			require.Equal(t, "b", v)
		}
	})
	t.Run("one endless line", func(t *testing.T) {
		src := &endless{line: []byte("abcdefgh")}
		h, err := explain.ReadHead(io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\nX-A: "), src))
		require.NoError(t, err)
		require.Equal(t, 429, h.Status)
		require.LessOrEqual(t, src.n, explain.MaxHeadBytes, "bytes read from the input")
		require.Len(t, h.Header["X-A"], 1)
		require.Less(t, len(h.Header["X-A"][0]), explain.MaxHeadBytes)
	})
	t.Run("1 MiB and more of input", func(t *testing.T) {
		in := "HTTP/1.1 429 Too Many Requests\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 100)+"\n", 12000)
		require.Greater(t, len(in), explain.MaxHeadBytes)
		r := &countingReader{r: strings.NewReader(in)}
		h, err := explain.ReadHead(r)
		require.NoError(t, err)
		require.Equal(t, 429, h.Status)
		require.LessOrEqual(t, r.n, explain.MaxHeadBytes)
		require.Less(t, len(h.Header["X-Pad"]), 12000)
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadHeadReadError(t *testing.T) {
	errBoom := errors.New("boom")
	cases := map[string]io.Reader{
		"at once":            iotest.ErrReader(errBoom),
		"after the status":   io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\n"), iotest.ErrReader(errBoom)),
		"within a line":      io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\nX-Rate"), iotest.ErrReader(errBoom)),
		"after a 1xx head":   io.MultiReader(strings.NewReader("HTTP/1.1 100 Continue\n\nHTTP/1.1 429 Too Many Requests\n"), iotest.ErrReader(errBoom)),
		"one byte at a time": iotest.OneByteReader(io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\nX-A: 1\n"), iotest.ErrReader(errBoom))),
		"with data":          &dataThenErr{data: "HTTP/1.1 429 Too Many Requests\nX-A: 1\n", err: errBoom},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			h, err := explain.ReadHead(r)
			require.ErrorIs(t, err, errBoom)
			require.NotErrorIs(t, err, explain.ErrNoHead)
			require.Contains(t, err.Error(), "boom")
			require.Equal(t, explain.Head{}, h)
		})
	}
	t.Run("an error after the end of the head is not reached", func(t *testing.T) {
		r := io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\nX-A: 1\n\n"), iotest.ErrReader(errBoom))
		h, err := explain.ReadHead(r)
		require.NoError(t, err)
		require.Equal(t, 429, h.Status)
		require.Equal(t, http.Header{"X-A": {"1"}}, h.Header)
	})
}

// dataThenErr returns all its data together with err, in one Read.
type dataThenErr struct {
	data string
	err  error
	done bool
}

func (d *dataThenErr) Read(p []byte) (int, error) {
	if d.done {
		return 0, d.err
	}
	d.done = true
	return copy(p, d.data), d.err
}

// received is the time of the Date header of most heads below. (The
// example head of the IETF dialect, ietfHead, is kept as documented, with
// the wrong weekday: 14 Mar 2041 is a Thursday.)
var received = time.Date(2041, time.March, 14, 9, 26, 53, 0, time.UTC)

const ietfHead = "HTTP/1.1 429 Too Many Requests\n" +
	"Date: Tue, 14 Mar 2041 09:26:53 GMT\n" +
	"RateLimit-Policy: \"burst\";q=100;w=60\n" +
	"RateLimit: \"burst\";r=0;t=30\n" +
	"Retry-After: Tue, 14 Mar 2041 09:26:55 GMT\n"

const ietfJSON = `{"status":429,"dialects":["ietf-draft-08"],"retry_after_seconds":2,` +
	`"policies":[{"name":"burst","limit":100,"remaining":0,"window_seconds":60,"reset_seconds":30,"unit":"requests"}]}`

func explainJSON(t *testing.T, head string, received time.Time) string {
	t.Helper()
	rep, err := explain.Explain(strings.NewReader(head), received)
	require.NoError(t, err)
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	return string(b)
}

func epoch(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func TestExplainJSON(t *testing.T) {
	cases := []struct {
		name, head, want string
	}{
		{
			name: "IETF draft-08 policy, Retry-After date",
			head: ietfHead,
			want: ietfJSON,
		},
		{
			name: "the same with CRLF and curl -v prefixes",
			head: "< " + strings.ReplaceAll(strings.TrimSuffix(ietfHead, "\n"), "\n", "\r\n< ") + "\r\n< \r\n",
			want: ietfJSON,
		},
		{
			name: "no policies",
			head: "HTTP/1.1 200 OK\nContent-Type: text/plain\nDate: Thu, 14 Mar 2041 09:26:53 GMT\n",
			want: `{"status":200,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name: "no headers at all",
			head: "HTTP/2 503\n",
			want: `{"status":503,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name: "status null without a status line",
			head: "Retry-After: 3\n",
			want: `{"status":null,"dialects":[],"retry_after_seconds":3,"policies":[]}`,
		},
		{
			name: "status null with an unreadable status code",
			head: "HTTP/1.1 42 Odd\nRetry-After: 3\n",
			want: `{"status":null,"dialects":[],"retry_after_seconds":3,"policies":[]}`,
		},
		{
			name: "status from the HTTP/2 :status pseudo-header",
			head: ":status: 429\nretry-after: 3\n",
			want: `{"status":429,"dialects":[],"retry_after_seconds":3,"policies":[]}`,
		},
		{
			name: "the final head after a 1xx head",
			head: "HTTP/1.1 100 Continue\n\nHTTP/1.1 429 Too Many Requests\nRetry-After: 3\n",
			want: `{"status":429,"dialects":[],"retry_after_seconds":3,"policies":[]}`,
		},
		{
			name: "fractional seconds from retry-after-ms",
			head: "HTTP/1.1 429 Too Many Requests\nretry-after-ms: 250\nRetry-After: 1\n",
			want: `{"status":429,"dialects":[],"retry_after_seconds":0.25,"policies":[]}`,
		},
		{
			name: "fractional seconds from x-ms-retry-after-ms",
			head: "HTTP/1.1 429 Too Many Requests\nx-ms-retry-after-ms: 1500\n",
			want: `{"status":429,"dialects":[],"retry_after_seconds":1.5,"policies":[]}`,
		},
		{
			name: "fractional Retry-After seconds",
			head: "HTTP/1.1 429 Too Many Requests\nRetry-After: 2.5\n",
			want: `{"status":429,"dialects":[],"retry_after_seconds":2.5,"policies":[]}`,
		},
		{
			name: "invalid Retry-After is null",
			head: "HTTP/1.1 429 Too Many Requests\nRetry-After: soon\n",
			want: `{"status":429,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name: "unknown policy fields are null",
			head: "HTTP/1.1 200 OK\nX-RateLimit-Remaining: 7\n",
			want: `{"status":200,"dialects":["x-ratelimit"],"retry_after_seconds":null,` +
				`"policies":[{"name":null,"limit":null,"remaining":7,"window_seconds":null,"reset_seconds":null,"unit":"requests"}]}`,
		},
		{
			name: "fractional reset seconds",
			head: "HTTP/1.1 200 OK\nX-RateLimit-Bucket: abcd1234\nX-RateLimit-Limit: 5\nX-RateLimit-Remaining: 4\nX-RateLimit-Reset-After: 1.250\n",
			want: `{"status":200,"dialects":["discord"],"retry_after_seconds":null,` +
				`"policies":[{"name":null,"limit":5,"remaining":4,"window_seconds":null,"reset_seconds":1.25,"unit":"requests"}]}`,
		},
		{
			name: "zero reset seconds are 0, not null",
			head: "HTTP/1.1 200 OK\nRateLimit-Policy: \"p\";q=10;w=1\nRateLimit: \"p\";r=3;t=0\n",
			want: `{"status":200,"dialects":["ietf-draft-08"],"retry_after_seconds":null,` +
				`"policies":[{"name":"p","limit":10,"remaining":3,"window_seconds":1,"reset_seconds":0,"unit":"requests"}]}`,
		},
		{
			name: "GitHub",
			head: "HTTP/2 403\ndate: Thu, 14 Mar 2041 09:26:53 GMT\nx-ratelimit-limit: 5000\nx-ratelimit-remaining: 0\n" +
				"x-ratelimit-used: 5000\nx-ratelimit-reset: " + epoch(received.Add(3660*time.Second)) + "\nx-ratelimit-resource: core\n",
			want: `{"status":403,"dialects":["github"],"retry_after_seconds":null,` +
				`"policies":[{"name":"core","limit":5000,"remaining":0,"window_seconds":null,"reset_seconds":3660,"unit":"requests"}]}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, explainJSON(t, c.head, received))
		})
	}
}

// TestExplainReceived: received stands for the time the response arrived
// only when the head has no valid Date header; with one, the Date wins.
func TestExplainReceived(t *testing.T) {
	resetAt := received.Add(30 * time.Second)
	base := "HTTP/1.1 429 Too Many Requests\nX-RateLimit-Limit: 10\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: " + epoch(resetAt) + "\n"
	want := func(reset string) string {
		return `{"status":429,"dialects":["x-ratelimit"],"retry_after_seconds":null,` +
			`"policies":[{"name":null,"limit":10,"remaining":0,"window_seconds":null,"reset_seconds":` + reset + `,"unit":"requests"}]}`
	}
	cases := []struct {
		name     string
		head     string
		received time.Time
		want     string
	}{
		{"no Date: received is the base", base, received, want("30")},
		{"no Date: a later received", base, received.Add(20 * time.Second), want("10")},
		{"no Date: a received past the reset", base, received.Add(time.Hour), want("0")},
		{"a Date wins over received", base + "Date: Thu, 14 Mar 2041 09:26:43 GMT\n", received, want("40")},
		{"a Date wins over a far-off received", base + "Date: Thu, 14 Mar 2041 09:26:43 GMT\n", time.Unix(0, 0), want("40")},
		{"an invalid Date: received is the base", base + "Date: yesterday\n", received, want("30")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, explainJSON(t, c.head, c.received))
		})
	}
	t.Run("the IETF head does not depend on received", func(t *testing.T) {
		for _, r := range []time.Time{received, time.Unix(0, 0), received.Add(-24 * time.Hour), received.Add(365 * 24 * time.Hour)} {
			require.Equal(t, ietfJSON, explainJSON(t, ietfHead, r), "received %v", r)
		}
	})
	t.Run("Retry-After date against received without Date", func(t *testing.T) {
		head := "HTTP/1.1 429 Too Many Requests\nRetry-After: Thu, 14 Mar 2041 09:26:55 GMT\n"
		require.Equal(t, `{"status":429,"dialects":[],"retry_after_seconds":2,"policies":[]}`, explainJSON(t, head, received))
		require.Equal(t, `{"status":429,"dialects":[],"retry_after_seconds":0,"policies":[]}`,
			explainJSON(t, head, received.Add(time.Minute)), "a date in the past gives 0")
	})
}

func TestExplainErrors(t *testing.T) {
	_, err := explain.Explain(strings.NewReader("\r\n\r\n"), received)
	require.ErrorIs(t, err, explain.ErrNoHead)

	errBoom := errors.New("boom")
	_, err = explain.Explain(io.MultiReader(strings.NewReader("HTTP/1.1 429 Too Many Requests\n"), iotest.ErrReader(errBoom)), received)
	require.ErrorIs(t, err, errBoom)
}

func TestFromObservation(t *testing.T) {
	cases := []struct {
		name      string
		obs       ratelimit.Observation
		hasStatus bool
		want      string
	}{
		{
			name: "zero observation without status",
			want: `{"status":null,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name:      "zero observation with status",
			hasStatus: true,
			want:      `{"status":0,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name: "a status is null when hasStatus is false",
			obs:  ratelimit.Observation{Status: 429},
			want: `{"status":null,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name:      "a zero Retry-After is 0, not null",
			obs:       ratelimit.Observation{Status: 429, HasRetryAfter: true},
			hasStatus: true,
			want:      `{"status":429,"dialects":[],"retry_after_seconds":0,"policies":[]}`,
		},
		{
			name:      "a Retry-After without HasRetryAfter is null",
			obs:       ratelimit.Observation{Status: 429, RetryAfter: time.Second},
			hasStatus: true,
			want:      `{"status":429,"dialects":[],"retry_after_seconds":null,"policies":[]}`,
		},
		{
			name: "policy fields, known and unknown",
			obs: ratelimit.Observation{
				Status:        429,
				RetryAfter:    1500 * time.Millisecond,
				HasRetryAfter: true,
				Dialects:      ratelimit.DialectSet(0).With(ratelimit.DialectOpenAI).With(ratelimit.DialectStripe),
				Policies: []ratelimit.Policy{
					{}, // nothing known: the unit defaults to requests
					{Name: "tokens", Unit: ratelimit.UnitTokens, Limit: 0, HasLimit: true, Remaining: 0, HasRemaining: true,
						Window: 90 * time.Second, Reset: 250 * time.Millisecond, HasReset: true},
					{Limit: 7, Remaining: 3, Reset: time.Minute, Window: -time.Second}, // no Has*: null
				},
			},
			hasStatus: true,
			want: `{"status":429,"dialects":["openai","stripe"],"retry_after_seconds":1.5,"policies":[` +
				`{"name":null,"limit":null,"remaining":null,"window_seconds":null,"reset_seconds":null,"unit":"requests"},` +
				`{"name":"tokens","limit":0,"remaining":0,"window_seconds":90,"reset_seconds":0.25,"unit":"tokens"},` +
				`{"name":null,"limit":null,"remaining":null,"window_seconds":null,"reset_seconds":null,"unit":"requests"}]}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(explain.FromObservation(c.obs, c.hasStatus))
			require.NoError(t, err)
			require.Equal(t, c.want, string(b))
		})
	}
}

// FuzzReadHead: whatever the input, ReadHead returns (no panic, no hang),
// with canonical header names, a status in range, and a head or an error.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\n\r\nbody",
		"< HTTP/2 301\n< location: /x\n<\n* x\n> GET /\n< HTTP/2 200\n< a: b\n",
		"  HTTP/1.1 100 Continue\n\n  HTTP/1.1 200 OK\n  X: a\n     b\n",
		":status: 429\nretry-after: 1\n", "X: 1\n", "hello\n", "\n\n", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := explain.ReadHead(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, explain.ErrNoHead) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if h.HasStatus && (h.Status < 100 || h.Status > 999) {
			t.Fatalf("status %d", h.Status)
		}
		if !h.HasStatus && len(h.Header) == 0 {
			t.Fatalf("an empty head without an error for %q", in)
		}
		for k := range h.Header {
			if k != textproto.CanonicalMIMEHeaderKey(k) {
				t.Fatalf("header name %q is not canonical", k)
			}
		}
	})
}
