package notify_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// hookReceiver is a real HTTP receiver of the webhook: it refuses its first post with a 500
// and keeps every post it accepted.
type hookReceiver struct {
	mu       sync.Mutex
	refused  int
	accepted []hookPost
}

type hookPost struct {
	EventID string
	Body    map[string]any
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused == 0 {
		h.refused++
		http.Error(w, "down for a moment", http.StatusInternalServerError)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	h.accepted = append(h.accepted, hookPost{EventID: r.Header.Get("Settle-Event-Id"), Body: body})
}

func (h *hookReceiver) posts() []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookPost(nil), h.accepted...)
}

// mailbox is a real SMTP server on 127.0.0.1 (go-smtp) that offers STARTTLS, requires
// AUTH PLAIN, refuses its first recipient with a temporary 451 and keeps every message.
type mailbox struct {
	mu       sync.Mutex
	refused  int
	messages []mailed
	tlsUsed  bool
	addr     string
	roots    *x509.CertPool
}

type mailed struct {
	From, To string
	Data     []byte
}

type mailSession struct {
	box      *mailbox
	authed   bool
	tls      bool
	from, to string
}

func startMailbox(t *testing.T) *mailbox {
	t.Helper()
	cert, roots := selfSigned(t)
	box := &mailbox{roots: roots}
	s := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		_, isTLS := c.TLSConnectionState()
		return &mailSession{box: box, tls: isTLS}, nil
	}))
	s.Domain = "127.0.0.1"
	s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.ReadTimeout, s.WriteTimeout = 10*time.Second, 10*time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box.addr = l.Addr().String()
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return box
}

func (s *mailSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *mailSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "settle" || pass != "s3cret" {
			return errors.New("bad credentials")
		}
		s.authed = true
		return nil
	}), nil
}

func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	if s.box.refused == 0 {
		s.box.refused++
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.to = to
	return nil
}

func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	s.box.messages = append(s.box.messages, mailed{From: s.from, To: s.to, Data: b})
	s.box.tlsUsed = s.box.tlsUsed || s.tls
	return nil
}

func (s *mailSession) Reset()        {}
func (s *mailSession) Logout() error { return nil }

func (b *mailbox) received() []mailed {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]mailed(nil), b.messages...)
}

// selfSigned makes a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// newHookServer starts the webhook receiver.
func newHookServer(t *testing.T) (*hookReceiver, string) {
	t.Helper()
	h := &hookReceiver{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}
