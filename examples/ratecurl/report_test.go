package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/headway-go/headway"
	"github.com/stretchr/testify/require"
)

func TestErrorMessagesAreCapped(t *testing.T) {
	s := newSummary()
	for i := range 15 {
		s.add(result{id: i + 1, err: fmt.Errorf("failure %d", i)})
	}
	s.add(result{id: 16, err: errors.New("failure 3")})
	s.add(result{id: 17, err: errors.New("failure 14")})
	s.add(result{id: 18, status: 200})
	s.finish(false)
	r := s.report()
	require.Equal(t, 18, r.Requests)
	require.Equal(t, 17, r.Errors)
	require.Equal(t, 17, r.Failed)
	require.Equal(t, 1, r.Succeeded)
	require.Len(t, r.ErrorMessages, maxErrorMessages+1)
	require.Equal(t, 2, r.ErrorMessages["failure 3"])
	require.Equal(t, 6, r.ErrorMessages[otherMessages])
	require.False(t, s.allSucceeded(18))
}

func TestRateLimitErrorsCountedTogether(t *testing.T) {
	s := newSummary()
	wrap := func(e *headway.RateLimitError) error {
		return &url.Error{Op: "Get", URL: "http://x/?q=1", Err: e}
	}
	for i := range 3 {
		s.add(result{id: i + 1, err: wrap(&headway.RateLimitError{
			Method: "GET", URL: "http://x/", StatusCode: 429, Status: "429 Too Many Requests",
			Attempts: 4, Waited: time.Duration(i+1) * time.Second, Body: []byte(fmt.Sprint("at ", i)),
			Reason: headway.ReasonAttemptsExhausted,
		})})
		s.add(result{id: i + 4, err: wrap(&headway.RateLimitError{
			Method: "GET", URL: "http://x/", RetryAfter: time.Duration(10-i) * time.Second, HasRetryAfter: true,
			Reason: headway.ReasonDeadline, Bound: 3*time.Second - time.Duration(i)*time.Millisecond,
		})})
	}
	r := s.report()
	require.Equal(t, map[string]int{"attempts exhausted": 3, "deadline too close": 3}, r.GaveUp)
	require.Len(t, r.ErrorMessages, 2, "%v", r.ErrorMessages)
	// The three 429s headway gave up on were final responses; the pacing
	// refusals (no status) were not.
	require.Equal(t, map[string]int{"429": 3}, r.Status)
}

func TestResultOK(t *testing.T) {
	for status, ok := range map[int]bool{0: false, 200: true, 204: true, 301: true, 404: true, 429: false, 500: false, 501: false, 599: false, 600: true} {
		res := result{status: status}
		require.Equal(t, ok, res.ok(), "status %d", status)
	}
	res := result{status: http.StatusOK, err: errors.New("reading the response body: unexpected EOF")}
	require.False(t, res.ok())
}

func TestProgressOnTerminal(t *testing.T) {
	var buf bytes.Buffer
	con := newConsole(&buf, true)
	p := newProgress(con, 3)
	s := newSummary()
	s.add(result{status: 200})
	p.update(s)
	con.printf("ratecurl: request 2: boom")
	s.add(result{status: 503})
	s.add(result{status: 200})
	p.update(s) // too soon after the last draw: skipped
	p.finish(s)
	require.Equal(t, "\r1/3 done, 0 failed\033[K"+
		"\r\033[Kratecurl: request 2: boom\n1/3 done, 0 failed"+
		"\r3/3 done, 1 failed\033[K\n", buf.String())

	buf.Reset()
	con = newConsole(&buf, false)
	p = newProgress(con, 3)
	p.update(s)
	p.finish(s)
	con.printf("line")
	require.Equal(t, "line\n", buf.String(), "no progress when stderr is not a terminal")
}
