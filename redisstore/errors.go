package redisstore

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnavailable is what every *UnavailableError is (errors.Is): Redis could
// not be used and the store fails closed.
var ErrUnavailable = errors.New("redisstore: redis unavailable")

// UnavailableError is returned, with WithFailClosed, by a call that needed
// Redis while Redis was unavailable: the call that found it so, and every
// call until Redis answers again. Those fail at once, except one per retry
// interval (WithRetryInterval), which first tries Redis, within the
// timeout, and goes on with it if it answers.
type UnavailableError struct {
	// Err is the Redis failure that opened the circuit: a *TimeoutError, a
	// network error, an error reply.
	Err error
	// Since is when Redis was found unavailable.
	Since time.Time
}

// Error says that Redis is unavailable, and why.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("redisstore: redis unavailable since %s: %v", e.Since.Format(time.RFC3339Nano), e.Err)
}

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the Redis failure.
func (e *UnavailableError) Unwrap() error { return e.Err }

// TimeoutError is a Redis call that took longer than the store's timeout
// (WithTimeout).
type TimeoutError struct {
	// Op names the call ("load", "compare-and-swap", "ping"); After is the
	// timeout.
	Op    string
	After time.Duration
}

// Error says which call timed out, and after how long.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("redis %s: no answer within %v", e.Op, e.After)
}

// Timeout reports true, as net.Error's Timeout does.
func (e *TimeoutError) Timeout() bool { return true }

// Mode is where a Store keeps pacing state at a moment.
type Mode uint8

const (
	// Shared: in Redis, shared with every process that uses it.
	Shared Mode = iota
	// Local: in this process only, because Redis is unavailable and the
	// store fails open.
	Local
	// Unavailable: nowhere, because Redis is unavailable and the store
	// fails closed (WithFailClosed).
	Unavailable
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Shared:
		return "shared"
	case Local:
		return "local"
	case Unavailable:
		return "unavailable"
	default:
		return fmt.Sprintf("Mode(%d)", uint8(m))
	}
}

// Event is a switch of a Store between Redis and its fallback (see
// WithOnSwitch).
type Event struct {
	// From and To are the modes before and after the switch: Shared to
	// Local or Unavailable when a Redis call fails, back to Shared when
	// Redis answers again.
	From, To Mode
	// At is when the switch happened.
	At time.Time
	// Err is the Redis failure that caused a switch away from Shared (nil
	// on the way back).
	Err error
	// Outage is, on the way back to Shared, how long Redis was unavailable.
	Outage time.Duration
}

// String describes the switch in one line.
func (e Event) String() string {
	if e.To == Shared {
		return fmt.Sprintf("redisstore: %s -> %s: redis is back after %v", e.From, e.To, e.Outage.Round(time.Millisecond))
	}
	return fmt.Sprintf("redisstore: %s -> %s: %v", e.From, e.To, e.Err)
}
