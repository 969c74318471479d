// Package alertstest gives tests the real Alertmanager and promtool. Tests never install
// them: `make deps` does, and a test that finds one missing skips, or fails under
// SETTLE_TEST_STRICT=1.
package alertstest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
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
	addr := proctest.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	p := proctest.Start(t, "alertmanager", cmd)
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	url := "http://" + addr
	p.WaitUntil(t, "ready at "+url, 20*time.Second, func() bool {
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}
