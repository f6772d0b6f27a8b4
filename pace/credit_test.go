package pace

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/headway-go/headway/ratelimit"
)

// ietfAnswer is a 200 whose IETF headers say left of limit per minute.
func ietfAnswer(left, limit int, at time.Time) Answer {
	h := http.Header{
		"Ratelimit-Policy": {`"default";q=` + strconv.Itoa(limit) + `;w=60`},
		"Ratelimit":        {`"default";r=` + strconv.Itoa(left) + `;t=30`},
	}
	return Answer{Obs: ratelimit.ParseHeaders(h, http.StatusOK, at)}
}

// TestCredit: what a key lends, and what booking the requests sent on it
// does to the state.
func TestCredit(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	req := Request{Route: "GET /items"}
	var cfg Config
	var s State

	require.Zero(t, s.Credit(t0, req.Route), "nothing answered yet")
	d := s.Reserve(t0, req, &cfg)
	require.True(t, d.OK)
	require.Zero(t, s.Credit(t0, req.Route), "in flight, not answered")
	s.Complete(ms(10), d.Lease, ietfAnswer(100, 101, ms(10)), &cfg)
	require.Zero(t, s.Credit(ms(10), "GET /other"), "a route no answer placed in a bucket")
	require.EqualValues(t, 50, s.Credit(ms(10), req.Route), "half of what the answer left")

	// Ten sent on credit and answered: booked, they leave less.
	spans := make([]Span, 10)
	for i := range spans {
		spans[i] = Span{Sent: time.Duration(20+i) * time.Millisecond, Recv: time.Duration(30+i) * time.Millisecond}
	}
	s.Spent(req.Route, ms(0), spans, &cfg)
	require.EqualValues(t, 45, s.Credit(ms(40), req.Route))
	// One in flight, lent a lease: it counts until answered.
	l := s.Lend(ms(41), req.Route, &cfg)
	require.Equal(t, 1, s.InFlight())
	require.EqualValues(t, 44, s.Credit(ms(42), req.Route))
	s.Complete(ms(51), l, ietfAnswer(88, 101, ms(51)), &cfg)
	require.Zero(t, s.InFlight())
	require.EqualValues(t, 44, s.Credit(ms(52), req.Route), "what the newest answer left: 88")

	// A quota near its end lends nothing; a 429 pauses the key, and
	// nothing is lent until the pause is over and an answer read.
	d = s.Reserve(ms(60), req, &cfg)
	s.Complete(ms(70), d.Lease, ietfAnswer(1, 101, ms(70)), &cfg)
	require.Zero(t, s.Credit(ms(70), req.Route))
	d = s.Reserve(ms(80), req, &cfg)
	h := http.Header{"Retry-After": {"2"}}
	s.Complete(ms(90), d.Lease, Answer{Obs: ratelimit.ParseHeaders(h, http.StatusTooManyRequests, ms(90))}, &cfg)
	require.Zero(t, s.Credit(ms(100), req.Route), "paused")
	require.Zero(t, s.Credit(ms(3000), req.Route), "a request goes first after a pause")
}

// TestCreditSilent: a server that sends no rate-limit headers is lent as
// much as a credit holds until it refuses a request, and nothing after (its
// answers are evidence then, weighed one by one), nor while a restart caps
// the requests in flight.
func TestCreditSilent(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	req := Request{Route: "GET /items"}
	var cfg Config
	var s State
	require.Zero(t, s.Credit(t0, req.Route), "not answered yet")
	d := s.Reserve(t0, req, &cfg)
	s.Complete(ms(10), d.Lease, Answer{Obs: ratelimit.Observation{Status: http.StatusOK}}, &cfg)
	require.True(t, s.Silent())
	require.Equal(t, int64(maxCredit), s.Credit(ms(10), req.Route))
	d = s.Reserve(ms(20), req, &cfg)
	s.Complete(ms(30), d.Lease, Answer{Obs: ratelimit.Observation{Status: http.StatusTooManyRequests}}, &cfg)
	require.Zero(t, s.Credit(ms(30), req.Route), "refused once: every answer is weighed")

	var r State
	r.k.answered, r.k.silent.slow = true, 1
	require.Zero(t, r.Credit(ms(30), req.Route), "restarted: the requests in flight are capped")
}

// TestCreditSilentBooksAsComplete: requests sent on credit to a server
// that sends no rate-limit headers, booked in a batch (Spent), leave the
// key deciding what it decides when each was reserved and completed in
// turn: after the server's first refusal, and at every instant of the
// search that follows, both states take the same decisions.
func TestCreditSilentBooksAsComplete(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	req := Request{Route: "GET /items"}
	ok := Answer{Obs: ratelimit.Observation{Status: http.StatusOK}}
	refused := Answer{Obs: ratelimit.Observation{Status: http.StatusTooManyRequests}}
	var cfg Config
	var each, batch State
	for _, s := range []*State{&each, &batch} {
		d := s.Reserve(t0, req, &cfg)
		s.Complete(ms(20), d.Lease, ok, &cfg)
	}
	// 30 requests, one every 10 ms, each answered 20 to 26 ms later.
	origin := ms(20)
	var spans []Span
	for i := range 30 {
		sent, recv := ms(30+10*i), ms(50+10*i+i%7)
		d := each.Reserve(sent, req, &cfg)
		require.True(t, d.OK)
		each.Complete(recv, d.Lease, ok, &cfg)
		spans = append(spans, Span{Sent: sent.Sub(origin), Recv: recv.Sub(origin)})
	}
	require.Equal(t, int64(maxCredit), batch.Credit(origin, req.Route))
	batch.Spent(req.Route, origin, spans, &cfg)
	for _, s := range []*State{&each, &batch} {
		d := s.Reserve(ms(340), req, &cfg)
		require.True(t, d.OK)
		s.Complete(ms(360), d.Lease, refused, &cfg)
	}
	for at := 360; at < 5000; at += 5 {
		de, db := each.Reserve(ms(at), req, &cfg), batch.Reserve(ms(at), req, &cfg)
		require.Equal(t, de.OK, db.OK, "at %d ms", at)
		if !de.OK {
			require.Equal(t, de.At, db.At, "at %d ms", at)
			continue
		}
		a := ok
		if at%40 == 0 {
			a = refused
		}
		each.Complete(ms(at+20), de.Lease, a, &cfg)
		batch.Complete(ms(at+20), db.Lease, a, &cfg)
	}
}

// openAIAnswer is a 200 with OpenAI's headers: a requests quota and a
// tokens quota, per minute, in one bucket.
func openAIAnswer(reqLeft, reqLimit, tokLeft, tokLimit string, at time.Time) Answer {
	h := http.Header{
		"X-Ratelimit-Limit-Requests":     {reqLimit},
		"X-Ratelimit-Remaining-Requests": {reqLeft},
		"X-Ratelimit-Reset-Requests":     {"60s"},
		"X-Ratelimit-Limit-Tokens":       {tokLimit},
		"X-Ratelimit-Remaining-Tokens":   {tokLeft},
		"X-Ratelimit-Reset-Tokens":       {"60s"},
	}
	return Answer{Obs: ratelimit.ParseHeaders(h, http.StatusOK, at)}
}

// TestCreditTokensQuota: a key with a quota in tokens is lent nothing: a
// request on credit does not say what it costs, so its answers must be
// read (found in review: 3 tokens of 100,000 left, and 256 lent on the
// requests quota alone).
func TestCreditTokensQuota(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	req := Request{Route: "POST /v1/chat/completions"}
	var cfg Config
	var s State
	d := s.Reserve(t0, req, &cfg)
	require.True(t, d.OK)
	a := openAIAnswer("9999", "10000", "3", "100000", ms(10))
	require.Len(t, a.Obs.Policies, 2)
	s.Complete(ms(10), d.Lease, a, &cfg)
	c := s.Credit(ms(10), req.Route)
	require.Zero(t, c, "3 tokens left of 100,000")
	d = s.Reserve(ms(20), req, &cfg)
	s.Complete(ms(30), d.Lease, openAIAnswer("9998", "10000", "99000", "100000", ms(30)), &cfg)
	require.Zero(t, s.Credit(ms(30), req.Route), "ample tokens: still nothing lent")
}
