package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/settle-dev/settle/internal/proctest"
	"github.com/settle-dev/settle/internal/testtool"
	"github.com/settle-dev/settle/ops/pg/localpg"
)

// Patroni's timings in the tests: the leader key lives ttl unless renewed, every node runs
// its loop each loopWait, and a node waits up to retryTimeout for etcd or Postgres before it
// gives up its role (Patroni wants ttl >= loopWait + 2*retryTimeout). A lost leader is
// replaced within ttl + loopWait.
const (
	patroniTTL          = 10 * time.Second
	patroniLoopWait     = 2 * time.Second
	patroniRetryTimeout = 4 * time.Second
)

// findPatroni returns the patroni and etcd programs. Tests never install them (`make deps`
// does): when they are missing the test skips, or fails under SETTLE_TEST_STRICT=1.
func findPatroni(t *testing.T) (patroni, etcd string) {
	t.Helper()
	const install = "sudo apt-get install -y patroni etcd-server (or make deps)"
	return testtool.Need(t, "/usr/bin/patroni", install), testtool.Need(t, "/usr/bin/etcd", install)
}

// patroniCluster is one etcd and two PostgreSQL nodes, each run by its own Patroni, all on
// loopback, in synchronous mode: a commit returns only once the synchronous standby has it,
// and Patroni promotes only that standby.
type patroniCluster struct {
	dir       string
	etcd      string // etcd's client address
	nodes     []*patroniNode
	callbacks bool
}

// patroniNode is one Patroni and the PostgreSQL it runs.
type patroniNode struct {
	name            string
	dir             string
	pgPort, apiPort int
	p               *proctest.Proc
}

// startPatroniCluster starts etcd, then node n1, which bootstraps the cluster and leads,
// then node n2, which copies it and streams from it, and returns once n2 is n1's
// synchronous standby. Everything stops when the test ends. With callbacks, each node runs
// its script <name>-on-role-change in the cluster's folder when its role changes (see
// followLeader); until then the scripts do nothing.
func startPatroniCluster(t *testing.T, callbacks bool) *patroniCluster {
	t.Helper()
	patroni, etcd := findPatroni(t)
	pgBin, err := localpg.FindBin()
	if err != nil {
		t.Fatal(err)
	}
	// The nodes run as postgres when the test runs as root (Postgres refuses root): their
	// folders must be reachable by that user, so they live in the system's temporary folder.
	dir, err := os.MkdirTemp("", "settle-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &patroniCluster{dir: dir, callbacks: callbacks}
	c.etcd = startEtcd(t, etcd, filepath.Join(dir, "etcd"))
	for _, name := range []string{"n1", "n2"} {
		n := c.startNode(t, patroni, pgBin, name)
		c.nodes = append(c.nodes, n)
		if name == "n1" {
			c.waitRole(t, n, "leader", 90*time.Second)
		}
	}
	c.waitRole(t, c.nodes[1], "sync_standby", 90*time.Second)
	return c
}

// startEtcd runs a one-member etcd on two free loopback ports and returns its client
// address once it answers healthy.
func startEtcd(t *testing.T, bin, dir string) string {
	t.Helper()
	client, peer := proctest.FreeAddr(t), proctest.FreeAddr(t)
	cmd := exec.Command(bin, "--name", "etcd1", "--data-dir", dir,
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "etcd1=http://"+peer)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := proctest.Start(t, "etcd", cmd)
	hc := &http.Client{Timeout: 2 * time.Second}
	p.WaitUntil(t, "healthy", 30*time.Second, func() bool {
		resp, err := hc.Get("http://" + client + "/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Health string }
		_ = json.NewDecoder(resp.Body).Decode(&h)
		return h.Health == "true"
	})
	return client
}

// startNode writes the node's Patroni configuration and starts its Patroni. The settings
// the cluster shares (bootstrap.dcs) are written to etcd by the node that bootstraps it.
func (c *patroniCluster) startNode(t *testing.T, patroni, pgBin, name string) *patroniNode {
	t.Helper()
	n := &patroniNode{name: name, dir: filepath.Join(c.dir, name)}
	n.pgPort, n.apiPort = proctest.FreePort(t), proctest.FreePort(t)
	if err := os.Mkdir(n.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// primary_start_timeout 0: a leader whose postmaster died is failed over to the
	// synchronous standby at once instead of restarted in place, which is safe because in
	// synchronous mode that standby holds every acknowledged commit. fsync is off for speed:
	// the crash is of processes, not of the machine, so the page cache outlives it; what the
	// test needs is that a commit is acknowledged only once the standby has it.
	conf := fmt.Sprintf(`scope: settle
name: %[1]s
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: %[3]s
bootstrap:
  dcs:
    ttl: %[4]d
    loop_wait: %[5]d
    retry_timeout: %[6]d
    synchronous_mode: true
    primary_start_timeout: 0
    postgresql:
      use_pg_rewind: false
      parameters:
        fsync: "off"
        max_connections: 100
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[7]d
  connect_address: 127.0.0.1:%[7]d
  data_dir: %[8]s/data
  pgpass: %[8]s/pgpass
  bin_dir: %[9]s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: %[8]s
%[10]s`, name, n.apiPort, c.etcd, int(patroniTTL/time.Second), int(patroniLoopWait/time.Second),
		int(patroniRetryTimeout/time.Second), n.pgPort, n.dir, pgBin, c.callbackConf(t, name))
	path := filepath.Join(c.dir, name+".yml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(patroni, path)
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "HOME="+n.dir)
	// Should the test binary die, Patroni is told to stop, and stops its Postgres with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if os.Geteuid() == 0 {
		cred := postgresUser(t)
		cmd.SysProcAttr.Credential = cred
		if err := os.Chown(n.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	n.p = proctest.Start(t, "patroni "+name, cmd)
	t.Cleanup(n.stop)
	return n
}

// callbackConf writes node name's role-change script, one that does nothing yet, and
// returns the lines of its configuration that name it; nothing when the cluster has no
// callbacks.
func (c *patroniCluster) callbackConf(t *testing.T, name string) string {
	t.Helper()
	if !c.callbacks {
		return ""
	}
	path := c.roleChangeScript(name)
	writeScript(t, path, "#!/bin/sh\nexit 0\n")
	return fmt.Sprintf("  callbacks:\n    on_role_change: %s\n", path)
}

func (c *patroniCluster) roleChangeScript(name string) string {
	return filepath.Join(c.dir, name+"-on-role-change")
}

// writeScript replaces the script at path at once, so Patroni never runs half of one.
func writeScript(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// followLeader makes pgbouncer b follow the cluster's leader, the way a deployment without
// a proxy that asks Patroni does it: when a node becomes the leader, its Patroni runs its
// role-change script, which points b's database at that node and tells b to reload. b then
// closes its server connections to the old leader as they come free and opens new ones to
// the new leader, while its clients stay connected.
func (c *patroniCluster) followLeader(t *testing.T, b *pgbouncer, psql string) {
	t.Helper()
	if os.Geteuid() == 0 {
		// The scripts run as postgres and rewrite b's configuration in place.
		cred := postgresUser(t)
		for _, p := range []string{filepath.Dir(b.conf), b.conf} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range c.nodes {
		// Patroni passes the action, the node's new role and the cluster's name.
		writeScript(t, c.roleChangeScript(n.name), fmt.Sprintf(`#!/bin/sh
case "$2" in master|primary) ;; *) exit 0 ;; esac
sed -i 's/^settle = .*/settle = host=127.0.0.1 port=%d dbname=settle user=postgres/' '%s' &&
exec '%s' -X -q -h 127.0.0.1 -p %d -U postgres -d pgbouncer -c RELOAD
`, n.pgPort, b.conf, psql, b.port))
	}
}

// stop stops Patroni, which stops its Postgres; a Postgres still running after is killed by
// the pid its folder names.
func (n *patroniNode) stop() {
	n.p.Stop(30 * time.Second)
	if pid := n.postmasterPID(); pid > 0 && syscall.Kill(pid, 0) == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// postmasterPID is the pid in the node's postmaster.pid, 0 when there is none.
func (n *patroniNode) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// killPostmaster kills the node's postmaster with SIGKILL, as the kernel's OOM killer or a
// crash would: nothing is flushed or shut down cleanly. Its Patroni lives on.
func (n *patroniNode) killPostmaster() error {
	pid := n.postmasterPID()
	if pid <= 0 {
		return fmt.Errorf("patroni %s: no postmaster.pid", n.name)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// URL is the connection string of database db on the node alone.
func (n *patroniNode) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.pgPort, db)
}

// URL is the connection string Settle is given: every node, and only the one that takes
// writes is used.
func (c *patroniCluster) URL(db string) string {
	hosts := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.pgPort)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		strings.Join(hosts, ","), db)
}

// roles returns each member's role as Patroni's REST API reports it (leader, sync_standby,
// replica), by node name, asking the nodes in turn until one answers.
func (c *patroniCluster) roles() map[string]string {
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, n := range c.nodes {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.apiPort))
		if err != nil {
			continue
		}
		var cl struct {
			Members []struct {
				Name, Role, State string
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&cl)
		resp.Body.Close()
		if err != nil {
			continue
		}
		roles := map[string]string{}
		for _, m := range cl.Members {
			if m.State == "running" || m.State == "streaming" {
				roles[m.Name] = m.Role
			}
		}
		return roles
	}
	return nil
}

// waitRole waits until Patroni reports n running in role, and returns how long it took.
func (c *patroniCluster) waitRole(t *testing.T, n *patroniNode, role string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var roles map[string]string
	for time.Since(start) < within {
		select {
		case <-n.p.Exited():
			t.Fatalf("patroni %s exited:\n%s", n.name, n.p.Out)
		default:
		}
		if roles = c.roles(); roles[n.name] == role {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("patroni %s is not %s after %s; members: %v\n%s", n.name, role, within, roles, n.p.Out)
	return 0
}
