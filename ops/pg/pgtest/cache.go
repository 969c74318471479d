package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/settle-dev/settle/migrations"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

// The quick loop (go test -short) starts each test binary's cluster from a copy of a stopped
// cluster that already holds the migrated template, kept under .settle/test-cache, instead
// of running initdb and every migration again in each of some twenty binaries: a copy costs
// a tenth of the CPU. The copy is named by a hash of everything that shapes it (the
// Postgres binaries' folder, the migrations, and the source of this package and of
// localpg), so a change to any of them makes a new one. make test (without -short) never
// uses it: every binary there makes its cluster and template from nothing, as before.

// cacheUnused is how long a cached cluster no binary has copied stays on disk once a newer
// one is made.
const cacheUnused = 24 * time.Hour

// copyCachedCluster fills the empty folder dir with a copy of the cached cluster, making the
// cache first when it is missing.
func copyCachedCluster(ctx context.Context, dir string) error {
	src, err := cachedCluster(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	_ = os.Chtimes(src, now, now) // marks it used, so a pruning binary keeps it
	// cp -a keeps the files' owner (the postgres user, when tests run as root) and modes.
	if out, err := exec.CommandContext(ctx, "cp", "-a", src+"/.", dir+"/").CombinedOutput(); err != nil {
		return fmt.Errorf("copy cached cluster: %w: %s", err, out)
	}
	return nil
}

// cachedCluster returns the folder of the cached cluster for today's migrations, making it
// when it is missing: a cluster started, given the migrated template, and stopped. Binaries
// that make it at once each make their own and the first to rename it into place wins.
func cachedCluster(ctx context.Context) (string, error) {
	key, err := cacheKey()
	if err != nil {
		return "", err
	}
	root := filepath.Join(ProjectDir(), ".settle", "test-cache")
	final := filepath.Join(root, key)
	if _, err := os.Stat(filepath.Join(final, "PG_VERSION")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	build, err := os.MkdirTemp(root, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(build) // gone once renamed; left behind only on failure
	c, err := localpg.Start(ctx, localpg.Options{Dir: build})
	if err != nil {
		return "", err
	}
	if c.Dir != build {
		// localpg moved the cluster elsewhere, where the postgres user can reach it.
		_ = c.Stop()
		os.RemoveAll(c.Dir)
		return "", errors.New("the cluster's folder was moved; not cached")
	}
	err = makeTemplate(ctx, c.URL)
	if serr := c.Stop(); err == nil {
		err = serr
	}
	if err != nil {
		return "", err
	}
	os.Remove(filepath.Join(build, "server.log"))
	if err := os.Rename(build, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, "PG_VERSION")); serr != nil {
			return "", err
		}
	}
	prune(root, final)
	return final, nil
}

// prune removes the cached clusters other than keep that no binary has copied for
// cacheUnused, and build folders of binaries that died making one.
func prune(root, keep string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		info, err := e.Info()
		if p == keep || err != nil || time.Since(info.ModTime()) < cacheUnused {
			continue
		}
		os.RemoveAll(p)
	}
}

// cacheKey hashes what a cached cluster depends on.
func cacheKey() (string, error) {
	bin, err := localpg.FindBin()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "bin %s\n", bin)
	err = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		fmt.Fprintf(h, "migration %s %d\n", path, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	for _, dir := range []string{"ops/pg/pgtest", "ops/pg/localpg"} {
		files, _ := filepath.Glob(filepath.Join(ProjectDir(), dir, "*.go"))
		if len(files) == 0 {
			return "", fmt.Errorf("no source in %s", dir)
		}
		for _, f := range files {
			r, err := os.Open(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "source %s\n", filepath.Base(f))
			_, err = io.Copy(h, r)
			r.Close()
			if err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
