// Package proctest runs the programs a test needs as real processes (settle itself, a test
// worker, etcd, Patroni, pgbouncer, Alertmanager, stripe-mock), so the test can signal them
// as an operator or a crash would. It builds a program of the module once per test binary,
// starts a process with its output kept for the test's messages, waits until the process
// answers, and stops it by its own pid when the test ends. Only tests use it.
package proctest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is a program of the module that the tests of one test binary build once and share.
// Use it through a pointer: it remembers its build.
type Binary struct {
	// Package is the program's import path, such as github.com/settle-dev/settle/cmd/settle.
	Package string
	// AtExit is handed the removal of the built program, to run after the binary's last
	// test (pgtest.AtExit); nil leaves the program in the temporary folder.
	AtExit func(func())

	once sync.Once
	path string
	err  error
}

// Path builds the program the first time a test asks for it and returns the built file;
// when the build failed, every test that asks fails with the compiler's output.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", filepath.Base(b.Package)+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		if b.AtExit != nil {
			b.AtExit(func() { os.RemoveAll(dir) })
		}
		b.path = filepath.Join(dir, filepath.Base(b.Package))
		if out, err := exec.Command("go", "build", "-o", b.path, b.Package).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", b.Package, b.err)
	}
	return b.path
}

// Buffer is a process's output: written by the process's pipe while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; the process's pipe calls it.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// FreeAddr returns a loopback address, "127.0.0.1:port", nothing listens on. The port is
// drawn below the kernel's ephemeral range (32768 and up on Linux), because the process
// given the address binds it only later: a port the kernel hands out for "127.0.0.1:0" can
// meanwhile be handed to any other test's listener, which then takes it first.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 50 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(12000)))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// FreePort returns the port of a FreeAddr.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(FreeAddr(t))
	p, _ := strconv.Atoi(port)
	return p
}

// Proc is a process a test started.
type Proc struct {
	// Name says which process it is in the test's messages.
	Name string
	Cmd  *exec.Cmd
	// Out is what the process wrote to its standard output and error.
	Out    *Buffer
	exited chan struct{}
}

// Start starts cmd with its standard output and error in the returned Proc's Out. When the
// test ends the process is killed by its own pid if it still runs, and its output is logged
// if the test failed. A test that wants the process stopped gently registers its own
// cleanup after Start, which runs first (see Stop).
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Out: &Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s:\n%s", name, p.Out)
		}
	})
	return p
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the process still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitCode is the process's exit code once it has exited, -1 when a signal ended it.
func (p *Proc) ExitCode() int {
	<-p.exited
	return p.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process, failing the test when it cannot be sent.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, p.Name, err)
	}
}

// Kill ends the process as a crash would, with SIGKILL (nothing flushed, nothing released),
// and returns once it has exited.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	p.Signal(t, syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to stop with SIGTERM and kills it if it still runs after grace; it
// returns once the process has exited.
func (p *Proc) Stop(grace time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.exited
	}
}

// Wait waits until the process exits, and fails the test with its output when it still
// runs after within.
func (p *Proc) Wait(t testing.TB, within time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("%s still running after %s; its output:\n%s", p.Name, within, p.Out)
	}
}

// WaitUntil polls ready every 50 ms until it holds, and fails the test with the process's
// output when the process exits first or ready does not hold within; what names the wait.
func (p *Proc) WaitUntil(t testing.TB, what string, within time.Duration, ready func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !ready(); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before %s; its output:\n%s", p.Name, what, p.Out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s after %s; its output:\n%s", p.Name, what, within, p.Out)
		}
	}
}

// WaitHTTP waits until a GET of url is answered, whatever the status.
func (p *Proc) WaitHTTP(t testing.TB, url string, within time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	p.WaitUntil(t, "answering "+url, within, func() bool {
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
}

// WaitDial waits until addr accepts a TCP connection.
func (p *Proc) WaitDial(t testing.TB, addr string, within time.Duration) {
	t.Helper()
	p.WaitUntil(t, "listening on "+addr, within, func() bool {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// WaitOutput waits until the process has written text.
func (p *Proc) WaitOutput(t testing.TB, text string, within time.Duration) {
	t.Helper()
	p.WaitUntil(t, "printing "+strconv.Quote(text), within, func() bool { return strings.Contains(p.Out.String(), text) })
}
