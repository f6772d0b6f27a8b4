package decide

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// timeoutError is a net.Error whose Timeout is configurable.
type timeoutError struct{ timeout bool }

func (e timeoutError) Error() string   { return "synthetic net error" }
func (e timeoutError) Timeout() bool   { return e.timeout }
func (e timeoutError) Temporary() bool { return false }

// TestIsTransient checks the allow-list on synthetic errors, wrapped as
// net/http and net wrap them.
func TestIsTransient(t *testing.T) {
	opErr := func(op string, err error) error {
		return &url.Error{Op: "Get", URL: "http://x/", Err: &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, err)}}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused", opErr("dial", syscall.ECONNREFUSED), true},
		{"reset", opErr("read", syscall.ECONNRESET), true},
		{"aborted", opErr("read", syscall.ECONNABORTED), true},
		{"broken pipe", opErr("write", syscall.EPIPE), true},
		{"ETIMEDOUT", opErr("read", syscall.ETIMEDOUT), true},
		{"unexpected EOF", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.ErrUnexpectedEOF), true},
		{"EOF", &url.Error{Op: "Get", URL: "http://x/", Err: io.EOF}, true},
		{"net timeout", fmt.Errorf("dial: %w", timeoutError{timeout: true}), true},
		{"net error, not a timeout", timeoutError{timeout: false}, false},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, true},
		{"DNS temporary", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, true},
		{"DNS not found", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, false},
		{"server closed idle", errors.New("http: server closed idle connection"), true},
		{"GOAWAY", errors.New("http2: server sent GOAWAY and closed the connection"), true},
		{"http2 lost", errors.New("http2: client connection lost"), true},
		{"reset as text", errors.New("read tcp: connection reset by peer"), true},
		{"canceled", context.Canceled, false},
		{"canceled wrapped", &url.Error{Op: "Get", URL: "http://x/", Err: context.Canceled}, false},
		{"a transport deadline (the caller's own is checked first)", context.DeadlineExceeded, true},
		{"canceled together with a reset", errors.Join(context.Canceled, syscall.ECONNRESET), false},
		{"attempt timeout", errors.New("headway: attempt timed out"), false}, // retried by the retry layer itself, not by this list
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"unknown authority, bare", x509.UnknownAuthorityError{}, false},
		{"hostname", x509.HostnameError{Host: "x"}, false},
		{"invalid certificate", x509.CertificateInvalidError{Reason: x509.Expired}, false},
		{"not TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, false},
		{"certificate error with a reset", errors.Join(&tls.CertificateVerificationError{}, syscall.ECONNRESET), false},
		{"unsupported scheme", errors.New(`unsupported protocol scheme "ftp"`), false},
		{"malformed response", errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "garbage"`), false},
		{"status line cut in its code", errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP status code "42"`), true},
		{"status line cut after the version", errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP status code ""`), true},
		{"status code not a number", errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP status code "garbage"`), false},
		{"header line cut short", errors.New(`net/http: HTTP/1.x transport connection broken: malformed MIME header: missing colon: "Content-Ty"`), true},
		{"HTTP/2 stream reset", errors.New("stream error: stream ID 1; INTERNAL_ERROR; received from peer"), true},
		{"HTTP/2 stream refused", errors.New("stream error: stream ID 3; REFUSED_STREAM; received from peer"), true},
		{"HTTP/2 protocol error", errors.New("stream error: stream ID 3; PROTOCOL_ERROR; received from peer"), false},
		{"other", errors.New("something else"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, IsTransient(tc.err), "%v", tc.err)
		})
	}
}

func TestUnprocessed(t *testing.T) {
	require.True(t, Unprocessed(&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}))
	require.True(t, Unprocessed(errors.New("stream error: stream ID 3; REFUSED_STREAM; received from peer")))
	require.False(t, Unprocessed(errors.New("stream error: stream ID 1; INTERNAL_ERROR; received from peer")))
	require.False(t, Unprocessed(syscall.ECONNRESET))
}
