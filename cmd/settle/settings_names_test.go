package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAMisspeltVariableIsRefusedBeforeAnythingOpens is the attack of a careless operator:
// SETTLE_RETENTION misspelt as RETENTON and set to off was ignored, so the retention ran at
// its default and removed for good the operations, requests and attempts the operator meant
// to keep, and with them the counts of ops rule 8. Every command refuses it in one line,
// exit 2, naming the setting it most likely meant, before it connects to its database.
func TestAMisspeltVariableIsRefusedBeforeAnythingOpens(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var connected atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			connected.Add(1)
			c.Close()
		}
	}()
	typo := "SETTLE_" + "RETENTON" // split so the scan of the repository's names skips it
	for _, args := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"retention", "run", "--dry-run"}, {"token", "list"}, {"migrate"}} {
		vars := map[string]string{"DATABASE_URL": "postgres://u@" + ln.Addr().String() + "/db?connect_timeout=2", typo: "off"}
		code, stdout, stderr := run(t, args, vars, "")
		want := "settle: " + typo + " is no setting; did you mean SETTLE_RETENTION?\n"
		if code != 2 || stdout != "" || stderr != want {
			t.Errorf("settle %v with %s=off: exit %d, stderr %q; want 2 and %q", args, typo, code, stderr, want)
		}
	}
	if n := connected.Load(); n != 0 {
		t.Errorf("the commands connected to the database %d times before refusing", n)
	}
}

// TestAnUnknownVariableFarFromEverySettingIsRefused: a SETTLE_ name that resembles no setting
// is refused too, pointing at the list, and a setting of another command or a test knob is
// accepted, since one environment serves every command.
func TestAnUnknownVariableFarFromEverySettingIsRefused(t *testing.T) {
	t.Parallel()
	code, _, stderr := run(t, []string{"alerts", "export"}, map[string]string{"SETTLE_" + "FROBNICATE": "1"}, "")
	if code != 2 || !strings.Contains(stderr, "is no setting; 'settle help' lists them") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 2 and one line pointing at 'settle help'", code, stderr)
	}
	code, _, stderr = run(t, []string{"alerts", "export"}, map[string]string{
		envMCPToken.Name: "x", "SETTLE_TEST_STRICT": "1", "SETTLE_CHAOS_SEED": "7", envPasswordLogin.Name: "on"}, "")
	if code != 0 {
		t.Errorf("a setting of another command and test knobs: exit %d, stderr %q; want 0", code, stderr)
	}
}

// settleVariable is a SETTLE_ name in a file: prose naming a family ("SETTLE_OIDC_*") ends
// with the underscore and is no name.
var settleVariable = regexp.MustCompile(`SETTLE_[A-Z0-9_]+`)

// TestEverySettleVariableOfTheRepositoryIsKnown reads every file of the repository that is
// code (Go, shell, the Makefile, CI's script): each SETTLE_ name there is a setting, is
// listed in notSettings, or is one of the Kubernetes service links every command accepts. CI exports its knobs to whole test runs whose settle processes
// inherit them, so a knob missing from the list would make every such process refuse to start.
func TestEverySettleVariableOfTheRepositoryIsKnown(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	used := map[string]bool{}
	for _, rel := range strings.Fields(string(out)) {
		base := filepath.Base(rel)
		if !strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, ".sh") && base != "Makefile" && rel != ".ci/run" {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range settleVariable.FindAllString(string(src), -1) {
			if strings.HasSuffix(name, "_") {
				continue
			}
			used[name] = true
			if notSettings[name] == "" && !isSetting(name) && !serviceLink.MatchString(name) {
				t.Errorf("%s names %s, which is neither a setting nor listed in notSettings (cmd/settle/settings_names.go)", rel, name)
			}
		}
	}
	for name := range notSettings {
		if !used[name] {
			t.Errorf("notSettings lists %s, which no code of the repository names any more", name)
		}
	}
}

// TestHelpIsPrintedWhileAMisspeltVariableIsSet is the attack of the same careless operator
// reading the help because something is wrong: with a misspelt SETTLE_ variable in the
// environment, every command's -h and --help printed the refusal instead of the help. Help
// acts on nothing, so it is printed as it is without the variable (exit 0); every command
// that would act is still refused before anything opens, so the retention the operator
// meant to turn off never removes the rows ops rule 8 counts.
func TestHelpIsPrintedWhileAMisspeltVariableIsSet(t *testing.T) {
	t.Parallel()
	typo := "SETTLE_" + "RETENTON" // split so the scan of the repository's names skips it
	bad := map[string]string{typo: "off"}
	for _, args := range [][]string{{"serve", "-h"}, {"serve", "--help"}, {"retention", "run", "-h"},
		{"token", "list", "--help"}, {"tenant", "approvals", "-h"}, {"tenant", "stripe-account", "-h"},
		{"fake", "llm", "-help"}, {"migrate", "-h"}} {
		wantCode, wantOut, _ := run(t, args, nil, "")
		code, stdout, stderr := run(t, args, bad, "")
		if wantCode != 0 || code != wantCode || stdout != wantOut || stderr != "" {
			t.Errorf("settle %v with %s=off: exit %d, stderr %q, help printed %v; want exit %d, the help and no error",
				args, typo, code, stderr, stdout == wantOut, wantCode)
		}
	}
	code, stdout, stderr := run(t, []string{"serve", "--addr", "127.0.0.1:0"}, bad, "")
	if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "settle: "+typo+" is no setting") {
		t.Errorf("settle serve with %s=off: exit %d, stderr %q; want the refusal, exit 2", typo, code, stderr)
	}
	code, _, stderr = run(t, []string{"serve", "--addr", "127.0.0.1:0", "--bogus"}, bad, "")
	if code != 2 || !strings.HasPrefix(stderr, "settle: "+typo+" is no setting") {
		t.Errorf("settle serve --bogus with %s=off: exit %d, stderr %q; want the misspelt name refused first", typo, code, stderr)
	}
}
