package decide

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// IsTransient reports whether a transport error is worth another attempt:
// the connection was refused, reset or cut short, or a network step timed
// out. It is an allow-list: anything unrecognised (an invalid URL or scheme,
// a TLS certificate that does not verify, a malformed request) is final.
// The caller's own context being done is handled before this is consulted.
func IsTransient(err error) bool {
	// A cancellation is final. A deadline is not, here: the caller's own
	// context is checked before this, so a DeadlineExceeded that reaches
	// it is a transport's timeout (ResponseHeaderTimeout, ...).
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if isCertificateError(err) {
		return false
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF):
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary
	}
	// Dial, TLS handshake and response-header timeouts of http.Transport.
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	// net/http and x/net/http2 report these without exported types.
	msg := err.Error()
	for _, s := range transientMessages {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return truncatedStatus(msg)
}

// truncatedStatus reports whether msg is net/http's complaint about a status
// line cut short in its code (`malformed HTTP status code "42"`, or "" when
// the line ended after the version), rather than about one that is not HTTP
// at all (`malformed HTTP status code "garbage"`), which no retry cures.
func truncatedStatus(msg string) bool {
	const prefix = `malformed HTTP status code "`
	i := strings.Index(msg, prefix)
	if i < 0 {
		return false
	}
	code, _, ok := strings.Cut(msg[i+len(prefix):], `"`)
	return ok && len(code) < 3 && strings.Trim(code, "0123456789") == ""
}

var transientMessages = [...]string{
	"server closed idle connection",
	"http2: server sent GOAWAY",
	"http2: client connection lost",
	"connection reset by peer",
	"broken pipe",
	// A connection closed in the middle of a header line reads as a
	// malformed one; a clean close at the same point is an EOF, retried
	// above. (A status line cut short is truncatedStatus's.)
	"malformed MIME header",
	// HTTP/2 streams reset by the server: the fault HTTP/1.1 reports as a
	// closed connection. REFUSED_STREAM also means "not processed" (see
	// Unprocessed).
	"; INTERNAL_ERROR",
	"; REFUSED_STREAM",
	"; CANCEL",
}

// Unprocessed reports whether err shows that the server did not process
// the request, so that it may be sent again whatever its method: the
// connection was refused, or an HTTP/2 server refused the stream (RFC 9113,
// section 8.7: REFUSED_STREAM means no processing happened).
func Unprocessed(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "; REFUSED_STREAM")
}

// isCertificateError reports whether err is a TLS verification failure,
// which no retry can fix.
func isCertificateError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
		record           tls.RecordHeaderError
	)
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verification) || errors.As(err, &record)
}
