package headway

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/headway-go/headway/internal/decide"
)

// IdempotencyKeyHeader is the header that makes a request safe to repeat
// (draft-ietf-httpapi-idempotency-key-header; Stripe, PayPal, Adyen, ...).
// A request that carries it is retried after a 5xx or a broken connection
// whatever its method; WithIdempotencyKeys adds one to POST and PATCH.
const IdempotencyKeyHeader = decide.IdempotencyKeyHeader

// newIdempotencyKey returns 128 random bits in hex.
func newIdempotencyKey() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("headway: generating an idempotency key: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
