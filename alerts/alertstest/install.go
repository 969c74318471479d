// Package alertstest gives tests the real Alertmanager and promtool, installing Debian's
// packages when they are missing. It never skips: a test that needs them fails loudly
// when they cannot be had.
package alertstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The binaries and the Debian packages that provide them.
const (
	AlertmanagerBin = "/usr/bin/prometheus-alertmanager"
	AlertmanagerPkg = "prometheus-alertmanager"
	PromtoolBin     = "/usr/bin/promtool"
	PromtoolPkg     = "prometheus"
)

var mu sync.Mutex

// Need returns bin, installing pkg with apt-get first when bin is missing. Test binaries
// of several packages may ask at once, so installs are serialised with a file lock, and
// the package's service is kept from starting with a temporary policy-rc.d.
func Need(t testing.TB, bin, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := install(bin, pkg); err != nil {
		t.Fatalf("%s is missing and could not be installed: %v\ninstall it with: sudo apt-get install -y --no-install-recommends %s", bin, err, pkg)
	}
	return bin
}

func install(bin, pkg string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root, so apt-get cannot run")
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "settle-apt.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open install lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("take install lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return nil // another test binary installed it while we waited
	}
	// Debian starts a package's service on install; a test wants none running.
	const policy = "/usr/sbin/policy-rc.d"
	if _, err := os.Stat(policy); os.IsNotExist(err) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", policy, err)
		}
		defer os.Remove(policy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"-o", "DPkg::Lock::Timeout=300", "-qq"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(out))
		}
		return nil
	}
	if err := apt("install", "-y", "--no-install-recommends", pkg); err != nil {
		// The package lists may be missing or stale on a fresh machine.
		if uerr := apt("update"); uerr != nil {
			return uerr
		}
		if err := apt("install", "-y", "--no-install-recommends", pkg); err != nil {
			return err
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s installed but %s is still missing", pkg, bin)
	}
	return nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}

// Alertmanager starts a real Alertmanager on loopback with a temporary configuration and
// storage, and returns its base URL; it is stopped when t ends.
func Alertmanager(t testing.TB) string {
	t.Helper()
	bin := Need(t, AlertmanagerBin, AlertmanagerPkg)
	dir := t.TempDir()
	// One receiver that goes nowhere: the test reads alerts back from the API.
	cfg := "route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n"
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start alertmanager: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case <-done:
			t.Fatalf("alertmanager exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("alertmanager not ready at %s after 20s: %v\n%s", url, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer collects a process's output while the test may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
