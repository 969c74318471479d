package localpg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A port is free only at the moment it is picked: until the new server binds it, another
// process may take it, such as the server of another test package running beside this one.
// The new server then cannot listen; Start starts it on another port instead of failing
// every test of the package, and never hands out the other process's server as its own.
func TestStartMovesToAnotherPortWhenItsPortWasTaken(t *testing.T) {
	ctx := context.Background()
	first, err := Start(ctx, Options{Dir: tempCluster(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()
	picks := 0
	pickPort = func() (int, error) {
		if picks++; picks == 1 {
			return first.Port, nil // taken since it was picked
		}
		return freePort()
	}
	defer func() { pickPort = freePort }()
	second, err := Start(ctx, Options{Dir: tempCluster(t)})
	if err != nil {
		t.Fatalf("a start whose picked port was taken meanwhile: %v", err)
	}
	defer second.Stop()
	conn, err := pgx.Connect(ctx, second.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		t.Fatal(err)
	}
	if second.Port == first.Port || filepath.Clean(dir) != filepath.Clean(second.Dir) {
		t.Fatalf("the second cluster (%s) answers on port %d with the data of %s; the first (%s) is on %d",
			second.Dir, second.Port, dir, first.Dir, first.Port)
	}
}

// tempCluster returns a fresh cluster folder under the project's gitignored .settle folder,
// removed with the folder the cluster really used when the test ends.
func tempCluster(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs("../../..")
	base := filepath.Join(root, ".settle")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "localpg-port-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(dir)
		// As root the cluster lives outside dir, where the postgres user can reach it.
		os.RemoveAll(filepath.Join(os.TempDir(), "settle-pg-"+strings.ReplaceAll(strings.Trim(filepath.Join(dir, "cluster"), "/"), "/", "_")))
	})
	return filepath.Join(dir, "cluster")
}
