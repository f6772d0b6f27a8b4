package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// explainDate is the Date of the heads below, as a time.
var explainDate = time.Date(2041, time.March, 14, 9, 26, 53, 0, time.UTC)

const explainIETFHead = "HTTP/1.1 429 Too Many Requests\n" +
	"Date: Thu, 14 Mar 2041 09:26:53 GMT\n" +
	"RateLimit-Policy: \"burst\";q=100;w=60\n" +
	"RateLimit: \"burst\";r=0;t=30\n" +
	"Retry-After: Thu, 14 Mar 2041 09:26:55 GMT\n"

const explainIETFJSON = `{"status":429,"dialects":["ietf-draft-08"],"retry_after_seconds":2,` +
	`"policies":[{"name":"burst","limit":100,"remaining":0,"window_seconds":60,"reset_seconds":30,"unit":"requests"}]}` + "\n"

// githubHead is a primary-limit 403 from GitHub, its reset 3660 s after
// its Date.
var githubHead = "HTTP/2 403\r\n" +
	"date: Thu, 14 Mar 2041 09:26:53 GMT\r\n" +
	"content-type: application/json; charset=utf-8\r\n" +
	"x-ratelimit-limit: 5000\r\n" +
	"x-ratelimit-remaining: 0\r\n" +
	"x-ratelimit-used: 5000\r\n" +
	"x-ratelimit-reset: " + strconv.FormatInt(explainDate.Add(3660*time.Second).Unix(), 10) + "\r\n" +
	"x-ratelimit-resource: core\r\n" +
	"\r\n" +
	`{"message":"API rate limit exceeded"}`

// explainReport mirrors the -explain output, for strict decoding.
type explainReport struct {
	Status            *int            `json:"status"`
	Dialects          []string        `json:"dialects"`
	RetryAfterSeconds *float64        `json:"retry_after_seconds"`
	Policies          []explainPolicy `json:"policies"`
}

type explainPolicy struct {
	Name          *string  `json:"name"`
	Limit         *int64   `json:"limit"`
	Remaining     *int64   `json:"remaining"`
	WindowSeconds *float64 `json:"window_seconds"`
	ResetSeconds  *float64 `json:"reset_seconds"`
	Unit          string   `json:"unit"`
}

// requireOneJSONLine checks that out is a successful -explain run: exit 0,
// nothing on stderr, exactly one line on stdout holding one JSON object,
// which it decodes strictly.
func requireOneJSONLine(t *testing.T, out cli) explainReport {
	t.Helper()
	require.Equal(t, exitOK, out.code, "stderr: %s", out.stderr)
	require.Empty(t, out.stderr)
	require.True(t, strings.HasSuffix(out.stdout, "}\n"), "stdout: %q", out.stdout)
	require.Equal(t, 1, strings.Count(out.stdout, "\n"), "stdout: %q", out.stdout)
	dec := json.NewDecoder(strings.NewReader(out.stdout))
	dec.DisallowUnknownFields()
	var r explainReport
	require.NoError(t, dec.Decode(&r), "stdout: %q", out.stdout)
	require.False(t, dec.More(), "more than one JSON value on stdout: %q", out.stdout)
	return r
}

func TestExplain(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{
			name:  "IETF head",
			args:  []string{"-explain"},
			stdin: explainIETFHead,
			want:  explainIETFJSON,
		},
		{
			name:  "CRLF line ends",
			args:  []string{"-explain"},
			stdin: strings.ReplaceAll(explainIETFHead, "\n", "\r\n") + "\r\nbody\r\n",
			want:  explainIETFJSON,
		},
		{
			name:  "curl -v prefixes",
			args:  []string{"-explain"},
			stdin: "< " + strings.ReplaceAll(strings.TrimSuffix(explainIETFHead, "\n"), "\n", "\r\n< ") + "\r\n< \r\n",
			want:  explainIETFJSON,
		},
		{
			name:  "-explain after other flags",
			args:  []string{"-n", "5", "-c", "2", "-v", "-json", "-H", "X-A: 1", "-explain"},
			stdin: explainIETFHead,
			want:  explainIETFJSON,
		},
		{
			name:  "--explain and -explain=true",
			args:  []string{"-max-wait", "1s", "--explain=true"},
			stdin: explainIETFHead,
			want:  explainIETFJSON,
		},
		{
			name:  "no rate-limit headers",
			args:  []string{"-explain"},
			stdin: "HTTP/1.1 200 OK\nContent-Type: text/plain\n\nhello\n",
			want:  `{"status":200,"dialects":[],"retry_after_seconds":null,"policies":[]}` + "\n",
		},
		{
			name:  "headers only: status null",
			args:  []string{"-explain"},
			stdin: "retry-after-ms: 250\n",
			want:  `{"status":null,"dialects":[],"retry_after_seconds":0.25,"policies":[]}` + "\n",
		},
		{
			name:  "GitHub head",
			args:  []string{"-explain"},
			stdin: githubHead,
			want: `{"status":403,"dialects":["github"],"retry_after_seconds":null,` +
				`"policies":[{"name":"core","limit":5000,"remaining":0,"window_seconds":null,"reset_seconds":3660,"unit":"requests"}]}` + "\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runCLI(t, c.stdin, c.args...)
			requireOneJSONLine(t, out)
			require.Equal(t, c.want, out.stdout)
		})
	}
}

func TestExplainGitHub(t *testing.T) {
	r := requireOneJSONLine(t, runCLI(t, githubHead, "-explain"))
	require.NotNil(t, r.Status)
	require.Equal(t, 403, *r.Status)
	require.Nil(t, r.RetryAfterSeconds)
	require.Len(t, r.Policies, 1)
	p := r.Policies[0]
	require.NotNil(t, p.Name)
	require.Equal(t, "core", *p.Name)
	require.NotNil(t, p.ResetSeconds)
	require.Equal(t, 3660.0, *p.ResetSeconds)
	require.NotNil(t, p.Limit)
	require.Equal(t, int64(5000), *p.Limit)
	require.NotNil(t, p.Remaining)
	require.Equal(t, int64(0), *p.Remaining)
	require.Nil(t, p.WindowSeconds)
	require.Equal(t, "requests", p.Unit)
}

// TestExplainWithoutDateUsesNow: a head without a Date is measured from the
// time ratecurl reads it, so a reset epoch far in the future stays close to
// its distance from now.
func TestExplainWithoutDateUsesNow(t *testing.T) {
	before := time.Now()
	reset := before.Add(time.Hour).Unix()
	r := requireOneJSONLine(t, runCLI(t,
		"HTTP/1.1 429 Too Many Requests\nX-RateLimit-Limit: 10\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: "+strconv.FormatInt(reset, 10)+"\n",
		"-explain"))
	elapsed := time.Since(before).Seconds()
	require.Len(t, r.Policies, 1)
	require.NotNil(t, r.Policies[0].ResetSeconds)
	got := *r.Policies[0].ResetSeconds
	require.LessOrEqual(t, got, 3600.0)
	require.GreaterOrEqual(t, got, 3600.0-1-elapsed) // the epoch is whole seconds
}

func TestExplainUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"a URL after -explain":  {"-explain", "https://example.com/"},
		"a URL before -explain": {"https://example.com/", "-explain"},
		"two arguments":         {"-explain", "a", "b"},
		"an argument after --":  {"-explain", "--", "-"},
		"a bad flag":            {"-explain", "-nope"},
	} {
		t.Run(name, func(t *testing.T) {
			out := runCLI(t, explainIETFHead, args...)
			require.Equal(t, exitUsage, out.code, "stderr: %s", out.stderr)
			require.Empty(t, out.stdout)
			require.Contains(t, out.stderr, "usage: ratecurl")
		})
	}
	t.Run("the message names -explain", func(t *testing.T) {
		out := runCLI(t, explainIETFHead, "-explain", "https://example.com/")
		require.Contains(t, out.stderr, "-explain")
		require.Contains(t, out.stderr, "https://example.com/")
	})
}

func TestExplainNoHead(t *testing.T) {
	for name, stdin := range map[string]string{
		"empty":       "",
		"blank lines": "\r\n\n  \n",
	} {
		t.Run(name, func(t *testing.T) {
			out := runCLI(t, stdin, "-explain")
			require.Equal(t, exitFailed, out.code)
			require.Empty(t, out.stdout)
			require.Contains(t, out.stderr, "-explain")
			require.Contains(t, out.stderr, "no response head")
			require.Equal(t, 1, strings.Count(out.stderr, "\n"), "stderr: %q", out.stderr)
		})
	}
	t.Run("nil stdin", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"-explain"}, nil, &stdout, &stderr)
		require.Equal(t, exitFailed, code)
		require.Empty(t, stdout.String())
		require.Contains(t, stderr.String(), "-explain")
	})
}

// TestExplainTextOnly: text without a status line or a header line is no
// response head.
func TestExplainTextOnly(t *testing.T) {
	out := runCLI(t, "hello world\n", "-explain")
	require.Equal(t, exitFailed, out.code)
	require.Empty(t, out.stdout)
	require.Contains(t, out.stderr, "no response head")
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestExplainWriteError(t *testing.T) {
	var stderr bytes.Buffer
	code := explainHead(strings.NewReader(explainIETFHead), failingWriter{}, &stderr, explainDate)
	require.Equal(t, exitFailed, code)
	require.Contains(t, stderr.String(), "-explain")
	require.Contains(t, stderr.String(), "disk full")
}

func TestExplainHeadUsesNowWithoutDate(t *testing.T) {
	head := "HTTP/1.1 429 Too Many Requests\nX-RateLimit-Limit: 10\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: " +
		strconv.FormatInt(explainDate.Add(30*time.Second).Unix(), 10) + "\n"
	want := `{"status":429,"dialects":["x-ratelimit"],"retry_after_seconds":null,` +
		`"policies":[{"name":null,"limit":10,"remaining":0,"window_seconds":null,"reset_seconds":%s,"unit":"requests"}]}` + "\n"
	for _, c := range []struct {
		name, head, reset string
	}{
		{"without Date: now is the base", head, "30"},
		{"with Date: the Date wins", head + "Date: Thu, 14 Mar 2041 09:26:43 GMT\n", "40"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := explainHead(strings.NewReader(c.head), &stdout, &stderr, explainDate)
			require.Equal(t, exitOK, code, stderr.String())
			require.Empty(t, stderr.String())
			require.Equal(t, strings.Replace(want, "%s", c.reset, 1), stdout.String())
		})
	}
}
