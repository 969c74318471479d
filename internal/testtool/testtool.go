// Package testtool decides what a test does when it needs a program the machine may lack
// (Chromium, Alertmanager, promtool, pgbouncer, stripe-mock) and which tests the quick loop
// leaves out. Tests never install anything: `make deps` does, and CI runs with
// SETTLE_TEST_STRICT=1 so that a missing program fails the run instead of skipping a test.
package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// StrictEnv names the environment variable that turns every skip for a missing program into
// a failure, and keeps the heavy tests in even under -short.
const StrictEnv = "SETTLE_TEST_STRICT"

// Strict says whether a missing program must fail the test.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// Need returns the path of program (an absolute path, or a name looked up on PATH and in
// extra folders). When it is missing the test fails under SETTLE_TEST_STRICT=1 and skips
// otherwise; either way the message names the command that installs it.
func Need(t testing.TB, program, install string, extra ...string) string {
	t.Helper()
	if p, ok := find(program, extra); ok {
		return p
	}
	msg := program + " is missing; install it with: " + install
	if Strict() {
		t.Fatalf("%s (%s=1: a missing program fails the test)", msg, StrictEnv)
	}
	t.Skip(msg)
	return ""
}

func find(program string, extra []string) (string, bool) {
	if filepath.IsAbs(program) {
		_, err := os.Stat(program)
		return program, err == nil
	}
	if p, err := exec.LookPath(program); err == nil {
		return p, true
	}
	for _, dir := range extra {
		p := filepath.Join(dir, program)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// GoBin is where `go install` puts programs: GOBIN, or GOPATH's bin.
func GoBin() string {
	if b := os.Getenv("GOBIN"); b != "" {
		return b
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), string(os.PathListSeparator))
	return filepath.Join(first, "bin")
}

// Heavy leaves a slow test out of the quick loop (`make check`, which runs go test -short):
// browsers, real Alertmanager, pgbouncer, failover, crashes, chaos and load. `make test`
// runs it, and so does -short under SETTLE_TEST_STRICT=1.
func Heavy(t testing.TB, what string) {
	t.Helper()
	if testing.Short() && !Strict() {
		t.Skipf("%s: left out of the quick loop (-short); make test runs it", what)
	}
}
