package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/url"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/outbox"
)

// SMTP is where Mail sends, read from a URL such as
// smtp://user:pass@host:587?from=settle@example.com.
type SMTP struct {
	// Addr is host:port.
	Addr string
	// ImplicitTLS is true for smtps:// (TLS from the first byte, port 465 by default);
	// smtp:// upgrades with STARTTLS whenever the server offers it.
	ImplicitTLS bool
	User        string
	Password    string
	From        string
}

// ParseSMTPURL reads an smtp:// or smtps:// URL. The sender comes from the from parameter.
// The URL holds a password, so no error repeats any part of it.
func ParseSMTPURL(raw string) (SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return SMTP{}, errors.New("SMTP URL: not a URL")
	}
	var s SMTP
	port := "587"
	switch u.Scheme {
	case "smtp":
	case "smtps":
		s.ImplicitTLS, port = true, "465"
	default:
		return SMTP{}, errors.New("SMTP URL: the scheme is not smtp or smtps")
	}
	if u.Hostname() == "" {
		return SMTP{}, errors.New("SMTP URL: no host")
	}
	if u.Port() != "" {
		port = u.Port()
	}
	s.Addr = net.JoinHostPort(u.Hostname(), port)
	if u.User != nil {
		s.User = u.User.Username()
		s.Password, _ = u.User.Password()
	}
	// mail's errors may quote the address they could not read.
	from, err := mail.ParseAddress(u.Query().Get("from"))
	if err != nil {
		return SMTP{}, errors.New("SMTP URL: the from parameter must be the sender's address")
	}
	s.From = from.Address
	return s, nil
}

// Mail sends each notification as a plain-text message to the person who follows the
// operation (the email they sign in with). Its Message-ID and Settle-Event-Id header carry
// the event id, so a copy sent again is recognised.
type Mail struct {
	Server     SMTP
	Operations Operations
	Kinds      Kinds
	Clock      ops.Clock
	// RootCAs verifies the server's certificate for STARTTLS and smtps; nil: the system's.
	RootCAs *x509.CertPool
	// Timeout bounds one delivery, connection included; default 30 s.
	Timeout time.Duration
}

var _ outbox.Publisher = (*Mail)(nil)

// Publish sends e; a refusal or a broken connection is a failed delivery, tried again later.
func (m *Mail) Publish(ctx context.Context, e outbox.Event) error {
	msg, err := Compose(ctx, m.Operations, m.Kinds, e)
	if err != nil {
		return err
	}
	to, err := mail.ParseAddress(msg.To)
	if err != nil {
		return fmt.Errorf("notification %s: the follower's email %q: %w", msg.EventID, msg.To, err)
	}
	if err := m.send(ctx, to.Address, m.render(msg, to.Address)); err != nil {
		return fmt.Errorf("mail notification %s: %w", msg.EventID, err)
	}
	return nil
}

// render writes the message: headers, then the text as quoted-printable UTF-8.
func (m *Mail) render(msg Message, to string) []byte {
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", (&mail.Address{Name: "Settle", Address: m.Server.From}).String())
	h("To", to)
	h("Subject", mime.QEncoding.Encode("utf-8", msg.Subject))
	h("Date", m.Clock.Now().Format(time.RFC1123Z))
	h("Message-ID", "<"+msg.EventID+"@settle.follow-up>")
	h("Settle-Event-Id", msg.EventID)
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(msg.Text, "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}

// send delivers one message in one SMTP session.
func (m *Mail) send(ctx context.Context, to string, body []byte) error {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, _, _ := net.SplitHostPort(m.Server.Addr)
	tlsConf := &tls.Config{ServerName: host, RootCAs: m.RootCAs, MinVersion: tls.VersionTLS12}
	var conn net.Conn
	var err error
	if m.Server.ImplicitTLS {
		conn, err = (&tls.Dialer{Config: tlsConf}).DialContext(ctx, "tcp", m.Server.Addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", m.Server.Addr)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok && !m.Server.ImplicitTLS {
		if err := c.StartTLS(tlsConf); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	}
	if m.Server.User != "" {
		// PlainAuth refuses to send the password in clear to anything but localhost.
		if err := c.Auth(smtp.PlainAuth("", m.Server.User, m.Server.Password, host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(m.Server.From); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
