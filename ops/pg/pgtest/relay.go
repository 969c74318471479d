package pgtest

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops/pg"
)

// Relay stands between a test's pools and the test Postgres and can be switched off: what
// Settle sees of a database server that stops and starts again, without stopping the
// server the other tests share. Off, it refuses new connections (its port is closed) and
// cuts the ones it carries, as a stopped server does; on again, it listens on the same
// address, so a pool reconnects without being told.
type Relay struct {
	t      testing.TB
	addr   string // where the relay listens
	target string // the test Postgres

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// NewBehindRelay returns the connection string of a fresh migrated database (dropped when t
// ends) that reaches the test Postgres through a Relay, and the relay.
func NewBehindRelay(t testing.TB) (*Relay, string) {
	t.Helper()
	u, err := url.Parse(URL(NewDatabase(t)))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	r := &Relay{t: t, target: u.Host, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: relay: %v", err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.Off)
	u.Host = r.addr
	return r, u.String()
}

// OpenBehindRelay is NewBehindRelay with the database opened as settle serve opens it; the
// pool is closed when t ends.
func OpenBehindRelay(t testing.TB) (*pg.DB, *Relay) {
	t.Helper()
	r, url := NewBehindRelay(t)
	db, err := pg.Open(context.Background(), url, pg.PreparedWhenDirect())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(db.Close)
	return db, r
}

// Off stops the database as its clients see it: the relay's port refuses connections and
// every connection through it is cut. It returns once no connection is left.
func (r *Relay) Off() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
}

// On starts the database again, on the address it had.
func (r *Relay) On() {
	r.t.Helper()
	var ln net.Listener
	var err error
	// The port was closed a moment ago; the kernel may take a moment to give it back.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ln, err = net.Listen("tcp", r.addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		r.t.Fatalf("pgtest: relay: listen again on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *Relay) serve(ln net.Listener) {
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.pipe(c)
		}
	}()
}

// pipe carries one client connection to the server until either side ends or Off cuts it.
func (r *Relay) pipe(client net.Conn) {
	server, err := net.Dial("tcp", r.target)
	if err != nil {
		client.Close()
		return
	}
	r.mu.Lock()
	if r.ln == nil {
		// Switched off while this connection was being made.
		r.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	r.conns[client], r.conns[server] = struct{}{}, struct{}{}
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(server, client); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	r.mu.Lock()
	delete(r.conns, client)
	delete(r.conns, server)
	r.mu.Unlock()
}
