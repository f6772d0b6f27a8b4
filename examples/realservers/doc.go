// Package realservers tests headway against rate limiters that other
// projects ship, each behind an httptest server on loopback, in real time:
// what their headers say, and how they count, as they really do, not as
// ratelimittest emulates them. It has no code of its own beyond the tests.
package realservers
