// Package alertstest gives tests the real Alertmanager and promtool. Tests never install
// them: `make deps` does, and a test that finds one missing skips, or fails under
// SETTLE_TEST_STRICT=1.
package alertstest

import (
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

	"github.com/settle-dev/settle/internal/testtool"
)

// The binaries and the Debian packages that provide them.
const (
	AlertmanagerBin = "/usr/bin/prometheus-alertmanager"
	AlertmanagerPkg = "prometheus-alertmanager"
	PromtoolBin     = "/usr/bin/promtool"
	PromtoolPkg     = "prometheus"
)

// Need returns bin. When it is missing the test skips, naming the Debian package to
// install, or fails under SETTLE_TEST_STRICT=1 (as in CI, where `make deps` installed it).
func Need(t testing.TB, bin, pkg string) string {
	t.Helper()
	return testtool.Need(t, bin, "sudo apt-get install -y --no-install-recommends "+pkg+" (or make deps)")
}

// Alertmanager starts a real Alertmanager on loopback with a temporary configuration and
// storage, and returns its base URL; it is stopped when t ends.
func Alertmanager(t testing.TB) string {
	t.Helper()
	testtool.Heavy(t, "a real Alertmanager")
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
