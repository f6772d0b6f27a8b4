package redisstore

import (
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway/pace"
)

// A state is stored as its version in decimal, a colon, when it was
// written (Unix milliseconds, by the writer's clock), a colon, its Expires
// (Unix nanoseconds, 0 for none), a colon, and its content as
// pace.State.MarshalBinary encodes it: bytes, not text (their first is the
// format, 0xB1 today), and nothing of a route but its hash. The encoding
// holds neither the version nor Expires: they are the fields in front.
//
// casScript compares the version in front (a missing or unreadable value
// has version 0) with ARGV[1] and, if they are equal, sets the key to
// ARGV[2], to expire in ARGV[3] milliseconds. It reads no more than the
// version: a uint64 has at most 20 digits.
var casScript = redis.NewScript(`
local head = redis.call('GETRANGE', KEYS[1], 0, 20)
local v = string.match(head, '^(%d+):') or '0'
if v ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// staleScript deletes the key if its state was written before ARGV[1]
// (Unix milliseconds), and reports whether it did.
var staleScript = redis.NewScript(`
local head = redis.call('GETRANGE', KEYS[1], 0, 40)
local w = string.match(head, '^%d+:(%d+):')
if w and tonumber(w) < tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// maxVersionDigits is the most digits a version has.
const maxVersionDigits = 20

// encode returns what is stored for st at version, written at written.
func encode(version uint64, written time.Time, st pace.State) ([]byte, error) {
	b := make([]byte, 0, 64+512)
	b = strconv.AppendUint(b, version, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, max(written.UnixMilli(), 0), 10)
	b = append(b, ':')
	var exp int64
	if !st.Expires.IsZero() {
		exp = st.Expires.UnixNano()
	}
	b = strconv.AppendInt(b, exp, 10)
	b = append(b, ':')
	b, err := st.AppendBinary(b)
	if err != nil {
		return nil, &encodeError{err}
	}
	return b, nil
}

// decode returns the state stored as val, and whether val was readable.
// An unreadable version reads as version 0 (as casScript reads it); an
// unreadable state (garbage, a format this version of pace does not know,
// the JSON that redisstore wrote before states were opaque), as a state
// with nothing but its version, which the next swap replaces.
func decode(val string) (pace.State, bool) {
	if val == "" {
		return pace.State{}, true
	}
	digits, rest, ok := strings.Cut(val, ":")
	if !ok || !isDigits(digits) || len(digits) > maxVersionDigits {
		return pace.State{}, false
	}
	version, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return pace.State{}, false
	}
	fresh := pace.State{Version: version}
	written, rest, ok := strings.Cut(rest, ":")
	if !ok || !isDigits(written) {
		return fresh, false
	}
	exp, body, ok := strings.Cut(rest, ":")
	if !ok || !isDigits(strings.TrimPrefix(exp, "-")) {
		return fresh, false
	}
	ns, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return fresh, false
	}
	st := pace.State{Version: version}
	if ns != 0 {
		st.Expires = time.Unix(0, ns)
	}
	if err := st.UnmarshalBinary([]byte(body)); err != nil {
		return fresh, false
	}
	return st, true
}

// isDigits reports whether s is a non-empty run of decimal digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
