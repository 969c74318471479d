// Package httppost posts JSON to a receiver's URL for every notifier of Settle: the outbox
// relay's webhooks, the follow-ups' Slack-compatible webhook, Alertmanager and the alert
// webhooks. A receiver's URL is often its credential (the path of a Slack incoming webhook
// is its secret; a URL may hold a password, or a token in its query), while a failed post's
// error is stored in an outbox row and may be logged. So the error of a post names the
// receiver's host and what went wrong, its HTTP status or a transport reason such as
// "timed out" or "connection refused", and nothing else: not the URL's path, query or
// userinfo, nor the receiver's answer or net/http's error text, which may repeat them.
package httppost

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// DefaultTimeout bounds a post sent with no client of the caller's.
const DefaultTimeout = 10 * time.Second

// Error is a failed post, in words that may be stored and logged.
type Error struct {
	// Host is the receiver's host, with its port when the URL names one; empty when the URL
	// could not be read.
	Host string
	// Status is the receiver's HTTP status; 0 when it gave none.
	Status int
	// Reason says why no status came, e.g. "timed out" or "connection refused".
	Reason string
}

func (e *Error) Error() string {
	to := e.Host
	if to == "" {
		to = "the receiver"
	}
	if e.Status != 0 {
		// The status text is Go's, not the receiver's reason phrase, which it chooses freely.
		return fmt.Sprintf("post to %s: answered %d %s", to, e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("post to %s: %s", to, e.Reason)
}

// JSON posts body to target as application/json, with eventID in the Settle-Event-Id header
// when it is not empty, so the receiver can drop a repeat. Any status other than 2xx is a
// failure. A nil client is one with DefaultTimeout. Every error is an *Error.
func JSON(ctx context.Context, c *http.Client, target, eventID string, body []byte) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return &Error{Reason: "the receiver's URL is not an http(s) URL"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return &Error{Host: u.Host, Reason: "the request could not be built"}
	}
	req.Header.Set("Content-Type", "application/json")
	if eventID != "" {
		req.Header.Set("Settle-Event-Id", eventID)
	}
	if c == nil {
		c = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := c.Do(req)
	if err != nil {
		return &Error{Host: u.Host, Reason: reason(err)}
	}
	defer resp.Body.Close()
	// Read to the end (up to a bound) so the connection can be used again.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return &Error{Host: u.Host, Status: resp.StatusCode}
	}
	return nil
}

// reason words a transport error of net/http without its text, which quotes the URL.
func reason(err error) string {
	var (
		dns     *net.DNSError
		netErr  net.Error
		verify  *tls.CertificateVerificationError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		unknown x509.UnknownAuthorityError
		name    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return "host not found"
		}
		return "name lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before an answer"
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &name), errors.As(err, &invalid):
		return "the receiver's TLS certificate was refused"
	case errors.As(err, &record), errors.As(err, &alert):
		return "TLS handshake failed"
	}
	return "transport error"
}
