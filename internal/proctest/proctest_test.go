package proctest_test

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
)

// A process is started with its output kept, waited for until it prints, stopped with
// SIGTERM, and its exit seen; one that ignores SIGTERM is killed after the grace.
func TestStartWaitAndStop(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, "sh", exec.Command("sh", "-c", "echo ready; exec sleep 30"))
	p.WaitOutput(t, "ready", 10*time.Second)
	if !p.Alive() {
		t.Fatal("the process is not alive after it printed")
	}
	p.Stop(5 * time.Second)
	if p.Alive() || p.ExitCode() != -1 {
		t.Fatalf("after Stop: alive %v, exit code %d; want ended by SIGTERM", p.Alive(), p.ExitCode())
	}

	stubborn := proctest.Start(t, "stubborn", exec.Command("sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"))
	stubborn.WaitOutput(t, "ready", 10*time.Second)
	start := time.Now()
	stubborn.Stop(300 * time.Millisecond)
	if stubborn.Alive() || time.Since(start) > 5*time.Second {
		t.Fatalf("a process ignoring SIGTERM was not killed after the grace (%s)", time.Since(start))
	}
}

// The waits answer once a process listens, and say what it printed when it exits first.
func TestWaitsForAListenerAndSeeAnExit(t *testing.T) {
	t.Parallel()
	p := proctest.Start(t, "exits", exec.Command("sh", "-c", "echo bye; exit 3"))
	p.Wait(t, 10*time.Second)
	if code := p.ExitCode(); code != 3 || !strings.Contains(p.Out.String(), "bye") {
		t.Fatalf("exit code %d, output %q", code, p.Out)
	}
	addr, l := listenOnAFreeAddr(t)
	defer l.Close()
	alive := proctest.Start(t, "sleeper", exec.Command("sleep", "30"))
	alive.WaitDial(t, addr, 5*time.Second)
	alive.Kill(t)
	if alive.Alive() || alive.Cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatal("Kill did not end the process with SIGKILL")
	}
}

// listenOnAFreeAddr listens on an address FreeAddr picked, after checking that nothing
// listened there. A free address is only free when picked: another process (another test
// binary picking from the same range) may bind it before this one does, and then a new
// address is picked.
func listenOnAFreeAddr(t *testing.T) (string, net.Listener) {
	t.Helper()
	for range 20 {
		addr := proctest.FreeAddr(t)
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("something listens on the free address %s", addr)
		}
		l, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return addr, l
	}
	t.Fatal("every free address picked was taken before the test could listen on it")
	return "", nil
}
