// Package pace decides when a request to a rate-limited API may be sent so
// that the server does not have to refuse it. It is headway's pacing layer
// as pure logic on explicit instants, in the style of golang.org/x/time/rate:
// no net/http, no goroutines, and the decisions read no clock (MemoryStore,
// which expires idle keys, is given one).
//
// # The model: identify the server from evidence
//
// A server limits a quota with one of a few algorithms, and says more or
// less about it. pace does not trust one reading of its headers; it keeps,
// per quota the server has ever shown (a policy: a 429's included), the
// evidence and the explanations still consistent with it, and sends a
// request when every surviving explanation says the server would admit it.
//
// The evidence is a ledger of the client's own requests: when each was sent
// and answered, what it cost, whether it was admitted or refused, and what
// the answer said (the remaining quota, the reset, Retry-After). The server
// counted each request at some instant between its sending and its answer;
// pace takes the middle (the request went out in half the round trip). The
// ledger is bounded: entries closer in time than a small share of the
// policy's window are merged, later, so that a quota of thousands keeps a
// few hundred entries.
//
// The explanations are candidate servers, each the algorithm a real server
// runs, with its parameters:
//
//   - a fixed window: the whole quota returns at each boundary, the
//     boundaries aligned to the clock, or anchored at the first request
//     after the last window ended;
//   - a sliding log: each unit returns one window after it was spent;
//   - a sliding window counter: this window's count plus the last one's,
//     weighted by how much of it the sliding window still covers, its
//     windows' phase only what the resets and the answers allow (not the
//     server's seconds, which go-chi/httprate's do not start on), and its
//     count, where the phase is uncertain, the most (or, to refute it, the
//     least) any phase allowed gives; that count is rarely whole, and the
//     servers admit while it is below the limit less the request's cost,
//     or while it rounds to at most that (go-chi/httprate), so where the
//     counter alone explains the answers it is paced past a whole unit of
//     room by a slack short of a half, less what the count can rise in the
//     round trips' spread (none, for a while, after a refusal that only
//     the slack sent);
//   - a bucket (token bucket, leaky bucket, GCRA): the quota returns
//     continuously at a rate, up to a burst.
//
// Each candidate predicts, from the ledger, what every answer should say.
// The remaining count is an exact integer: an answer that shows more left
// than a candidate allows refutes it (the server gave back what that
// candidate says it keeps), and a probe's refusal (below) refutes the
// candidates that said it would be admitted. An answer that shows less left
// than a candidate explains (any other refusal included) is booked, for
// that candidate, as spending by others (another process, another client
// on the same quota) at the answer's instant, and ages as that candidate
// says such spending does; a candidate that needs much more of it than the
// best one is set aside, until a refusal that it foresaw and every
// candidate heeded did not brings it back. A server that
// says nothing (no headers) has admitted or refused as its only evidence
// (see "A server that says nothing" below).
// Admissions are counted exactly where the instants are not: more admitted
// under one reset instant that the server wrote on its clock than the
// limit, or more than twice a small limit within less than the shortest
// window (each request counted somewhere between its sending and its
// answer), is what no window, sliding counter or log admits, and leaves
// the bucket alone; where a bucket of one and a window of one answer alike
// ("0 of 1 left, resets at the next second"), a probe tests the count.
// A window the server does not say, whose resets in whole seconds say it
// ends within one, is taken to be a second long, as servers configure
// them, until it ends before such a window could, or more are admitted
// within a second than any window of a second admits; then its length is
// searched for between the bounds the ends shown and the admissions set,
// the last unit of each window sent at the middle of the bounds on its end
// (its answer, a fresh window or not, halves them at no risk of a refusal).
// A client that spends each window's quota in one burst and then waits
// shows neither: until a window held its last unit for most of a second,
// that unit is held to land just before the soonest end a window of a
// second allows, where a shorter window shows a fresh one (never past the
// request's Deadline: a request is not failed for a test).
// Resets, Retry-After and the window's length are evidence too: they bound
// a candidate's parameters (where a window ends, how fast a bucket fills:
// what is missing over the latest and the earliest instant the reset
// allows, a unit less if the server rounds what is left down; resets that
// no bucket's time until full explains refute the bucket), never the
// schedule by themselves; a Retry-After is still obeyed as a pause of the
// quota's bucket. Answers are ordered by what can have returned between
// them, not by their instants alone: requests in flight together come back
// in any order, and one that found more left than can have come back since
// the newest was counted before it.
//
// Sending follows from the survivors:
//
//   - A request goes when every surviving candidate would admit it: safe
//     before the server is known, and as fast as the server allows once it
//     is. A sliding log, say, is then paced by the client's own oldest
//     admission in the window, which returns one window after it.
//   - When the survivors disagree and waiting for the cautious one costs
//     more than a refusal would (a few round trips, 100 ms at least), or
//     its small delays have added up to that much since the last probe,
//     one request goes at the instant the optimistic one allows: a probe.
//     (A bucket's optimistic rate is the middle of the rates the answers
//     measured and its resets allow: a bucket that says when it is full
//     again is not probed at a rate that would fill it sooner than it says.
//     A window's optimistic end is the second the server's Date says it
//     ends at, or, for a window anchored at its first request, a period at
//     its shortest after the answer that found the whole quota less one
//     left: resets in whole seconds, rounded up, say a second or two
//     later.) A refusal refutes that candidate, or bounds the parameter it
//     tested (one 429); an admission leaves the evidence to refute those
//     that said no. One probe is in flight per policy at most, and probes are
//     budgeted: a hundredth of one per admitted request, two to start
//     with, and one per eight windows of a policy that admits nothing, so
//     an unknown limit, or a small-burst bucket's true rate, is learnt with
//     a bounded number of refusals, not one per cycle.
//   - Requests in flight count against every candidate until answered, and
//     a request is taken to reach the server 80% of half the least recent
//     round trip after it leaves.
//
// Nothing latches: a refuted candidate is considered again after 64 of the
// policy's windows or a minute, whichever is longer (the last candidate
// standing is never refuted: every explanation failing means the evidence
// misled or the server changed), and parameters are bounds that later
// answers move.
//
// # A server that says nothing
//
// A server that sends no rate-limit headers is modelled the same way, with
// a fixed set of candidates and admitted or refused as the evidence: a
// sliding log or a fixed window on the server's clock, of each of 20
// windows from 10 ms to an hour, a sliding window counter (this window's
// count and the last one's, weighed) of each of those windows from a
// second, and a bucket of each of 24 rates from 1000/s to one a minute
// (the windows and rates rate limiters are configured with). Each
// candidate's other parameter, its limit (a window's count, a bucket's
// capacity), is bounded from both sides by the
// client's ledger of arrivals, weighed in the order they reached the
// server: an admission proves the limit is at least what the window (or
// bucket) then held, counting only what was certainly in it; a refusal,
// that it is at most what it held, refused arrivals included (some servers
// count them). Bounds that cross refute the candidate; a Retry-After
// refutes those that would admit nothing until well after it.
//
// Nothing is held back until the first refusal (the arrivals are only
// kept, and weighed then). After it a request goes when every surviving
// candidate, at the limit it has proven, admits it. Where they disagree by
// more than the arrivals' margin (by 10 ms for a request, or by what adds
// up to that over the requests since they last agreed: a bucket of half
// a fast server's rate holds each request back a few milliseconds only),
// bursts of probes test them: the first at
// 100 ms after the last admission, each after a refused one twice as far
// from the search's start (so a few refusals pass many candidates and the
// wait at most doubles), at the latest instant a candidate allows within
// that horizon; after an admitted one at once, with as many probes as the
// soonest candidate admits and one more than any that holds the request
// back would at the most it may allow (doubling from one, as TCP's slow
// start, up to 16), so that a slow bucket is refuted in one round trip. A
// refusal refutes the candidates that allowed it, an admission those that
// did not. The probes' budget is eight refusals to start with, a hundredth
// per admission and one per five seconds.
//
// When every candidate is refuted, the evidence is first taken to have
// misled (the first burst's arrivals are estimated half way through round
// trips that may include setting up connections, and in what order a
// server took a burst's last admission and first refusal, estimated
// within a margin of each other, is not known): the bounds it proved are
// forgotten, and the search starts again from the next refusal, which
// weighs the arrivals the server still counts as the first refusal did,
// the requests in flight capped meanwhile at one and one more per
// admission (TCP's slow start).
// When it happens again (another client's spending, a server none
// describes), the envelope takes over: the sliding
// logs' proven limits all hold together (as the envelope of a token
// bucket's admissions does), each once the ledger spans twice its window;
// a refusal bounds the window nearest its limit, and probes raise the
// limits one at a time. The first burst costs what was in flight when the
// first refusal came; from then on a server one candidate describes is
// paced at its limit.
//
// Pauses (a Retry-After, a 403 or 429 of a secondary limit) belong to the
// server-named bucket that was refused (GitHub's resource, Discord's bucket,
// an IETF partition key), not to the whole key: a search quota's hour-long
// pause does not hold back requests counted in the core quota. Quotas a
// user declares (Config.Quotas) are sliding logs of known parameters, kept
// with a margin for the spread between sending and arrival.
//
// # Using it
//
// Requests are grouped by key (a host, an API key). A key's State is a
// value; everything that decides is a method of State that takes the time:
//
//	d := st.Reserve(now, req, cfg) // may req be sent at now?
//	if !d.OK { /* ask again at d.At, or sooner if the state changes */ }
//	// ... send, then report what the response said:
//	st.Complete(now, d.Lease, pace.Answer{Obs: obs, Date: date}, cfg)
//	// or, when the request never left:
//	st.Cancel(d.Lease, cfg)
//
// A Lease is the unit: taken before sending, it counts as in flight until it
// is completed, cancelled, or expires (Config.LeaseTTL), so that an
// abandoned request cannot hold quota forever.
//
// # Credit: the hot path
//
// A request with ample quota needs none of this. Credit says how many more
// requests on a route every explanation admits whatever happens next (half
// of what the newest answers, or the candidates, leave, while the client
// spends at most a quarter of the quota in its window: nearer a limit, the
// answers tell where a window ends; on a server that sends no headers, as
// much as a credit holds until its first refusal, and nothing after, when
// its admissions are its evidence), and a
// caller sends that many without asking the State, reading none of their
// answers but their statuses. It books them later, in a batch, under the
// store's lock and before the State decides again: those answered (under
// 400) with Spent, those still in flight with Lend, whose lease is then
// completed or cancelled as any other (on a Silent key, all of them before
// any answer is taken in: its evidence is weighed in the order it reached
// the server). A credit is counted again at each
// Reserve and Complete:
//
//	n := st.Credit(now, route) // after a Reserve or Complete
//	// ... up to n requests go; each answer under 400 is kept as a Span,
//	// its send and answer times as durations since an origin (now):
//	st.Spent(route, now, spans, cfg) // before the next Reserve or Complete
//
// headway's pacing layer spends a credit for the in-process store only (a
// fleet on a shared store must see each request) and reads an answer at
// least once per credit.
//
// # Stores
//
// The State of each key lives in a Store, which only has to load a key's
// state and replace it atomically (compare-and-swap on its Version); the
// algorithm lives here, once. A State is opaque: a store that keeps it
// outside the process encodes it with MarshalBinary, a versioned binary
// form that holds no route or path (only their hashes), and decodes it with
// UnmarshalBinary, which answers garbage or an unknown version with an
// error and a fresh state. NewMemoryStore is the in-process store; package
// pacetest checks any Store against the contract.
package pace
