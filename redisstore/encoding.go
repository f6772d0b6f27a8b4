package redisstore

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/headway-go/headway/pace"
)

// A state is stored as its version in decimal, a colon, when it was written
// (Unix milliseconds, by the writer's clock), a colon, and the state: JSON
// ('{'), or, for a state JSON cannot hold (a float that is not finite), 'g'
// and the state in encoding/gob. The version field inside is zero; the one
// in front is the state's.
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
func encode(version uint64, written time.Time, st pace.State) (string, error) {
	st.Version = 0
	var b bytes.Buffer
	b.WriteString(strconv.FormatUint(version, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(max(written.UnixMilli(), 0), 10))
	b.WriteByte(':')
	j, err := json.Marshal(st)
	if err == nil {
		b.Write(j)
		return b.String(), nil
	}
	if _, ok := errors.AsType[*json.UnsupportedValueError](err); !ok {
		return "", &encodeError{err}
	}
	b.WriteByte('g')
	if err := gob.NewEncoder(&b).Encode(&st); err != nil {
		return "", &encodeError{err}
	}
	return b.String(), nil
}

// decode returns the state stored as val, and whether val was readable.
// An unreadable version reads as version 0 (as casScript reads it); an
// unreadable state, as a state with nothing but its version, which the
// next swap replaces.
func decode(val string) (pace.State, bool) {
	if val == "" {
		return pace.State{}, true
	}
	digits, rest, ok := strings.Cut(val, ":")
	if !ok || digits == "" || len(digits) > maxVersionDigits || strings.Trim(digits, "0123456789") != "" {
		return pace.State{}, false
	}
	version, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return pace.State{}, false
	}
	if written, body, ok := strings.Cut(rest, ":"); ok && written != "" && strings.Trim(written, "0123456789") == "" {
		rest = body
	}
	var st pace.State
	switch {
	case strings.HasPrefix(rest, "{"):
		err = json.Unmarshal([]byte(rest), &st)
	case strings.HasPrefix(rest, "g"):
		err = gob.NewDecoder(strings.NewReader(rest[1:])).Decode(&st)
	default:
		err = errors.New("unknown encoding")
	}
	if err != nil {
		return pace.State{Version: version}, false
	}
	st.Version = version
	return st, true
}
