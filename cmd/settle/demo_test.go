package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A --history that is not a number of days is one line and exit 2, before anything starts.
func TestDemoHistoryFlagMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		vars map[string]string
	}{
		{[]string{"demo", "--history", "1y", "--dir", t.TempDir()}, nil},
		{[]string{"demo", "--history", "30", "--dir", t.TempDir()}, nil},
		{[]string{"demo", "--history", "-3d", "--dir", t.TempDir()}, nil},
		{[]string{"demo", "--dir", t.TempDir()}, map[string]string{"SETTLE_DEMO_HISTORY": "90d"}},
	} {
		code, stdout, stderr := run(t, tc.args, tc.vars, "")
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--history") {
			t.Errorf("settle %v %v: exit %d, stderr %q; want 2 and one line naming --history", tc.args, tc.vars, code, stderr)
		}
	}
	for v, want := range map[string]int{"0": 0, "0d": 0, "7d": 7, "30d": 30, "35d": 35} {
		if got, err := parseHistoryDays(v); err != nil || got != want {
			t.Errorf("parseHistoryDays(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
}

// TestDemoRefusesAFolderThatIsNotACluster: 'settle demo --dir ~/work', meant as "put it
// under there", gave the folder to the postgres user (when run as root) and then failed in
// initdb, which refuses a folder holding files. A --dir that holds files but no Postgres
// cluster is refused in one line with exit 2 before anything starts, and the folder keeps
// its owner, its mode and its files.
func TestDemoRefusesAFolderThatIsNotACluster(t *testing.T) {
	t.Parallel()
	parent, err := os.MkdirTemp("", "settle-demo-dir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil { // reachable by the postgres user, as a home folder may be
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []string{"demo", "--dir", dir, "--history", "0d", "--addr", "127.0.0.1:0"}
	var stdout, stderr bytes.Buffer
	code := Main(ctx, args, envList(nil), strings.NewReader(""), &stdout, &stderr)
	refusedInOneLine(t, args, code, stdout.String(), stderr.String(), "--dir")
	after, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if before.Sys().(*syscall.Stat_t).Uid != after.Sys().(*syscall.Stat_t).Uid || before.Mode() != after.Mode() {
		t.Errorf("the refused demo changed %s: owner %d, mode %s; was %d, %s", dir,
			after.Sys().(*syscall.Stat_t).Uid, after.Mode(), before.Sys().(*syscall.Stat_t).Uid, before.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the refused demo left %d entries in %s; want the one file", len(entries), dir)
	}
}
