// Package localpg runs a private PostgreSQL cluster from the machine's own server binaries:
// a folder of the project's, a free loopback port and a private socket directory. The demo,
// the tests and the benchmarks use it so nothing needs configuring.
package localpg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configure a cluster.
type Options struct {
	// Dir holds the cluster's data. An existing cluster there is reused.
	Dir string
	// Durable keeps fsync and synchronous commit on. Tests turn them off for speed.
	Durable bool
	// Settings are extra server settings (name → value).
	Settings map[string]string
	// Log receives the server's output; nil discards it into Dir/server.log.
	Log *os.File
	// StandbyOf, when set, is the connection string of a running primary: a new cluster is
	// then a base backup of it that streams its WAL as a read-only standby (see standby.go),
	// not an empty one. Its application_name is the standby's name in the primary's
	// synchronous_standby_names.
	StandbyOf string
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	Dir       string
	SocketDir string
	Port      int
	cmd       *exec.Cmd
	done      chan error
	logFile   *os.File
}

// ErrNoServer means the machine has no PostgreSQL server binaries.
var ErrNoServer = errors.New("no PostgreSQL server binaries found (install the Debian package postgresql)")

// FindBin returns the directory holding initdb, postgres and pg_basebackup: SETTLE_PG_BIN if
// set, then initdb's own folder when PATH holds it or a link to it, then the newest
// /usr/lib/postgresql/NN/bin.
func FindBin() (string, error) {
	if d := os.Getenv("SETTLE_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("SETTLE_PG_BIN=%s has no initdb: %w", d, err)
		}
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// A link to initdb in PATH points at the folder that holds the other binaries
		// (pg_basebackup among them).
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	if len(dirs) == 0 {
		return "", ErrNoServer
	}
	return filepath.Dir(dirs[0]), nil
}

func versionOf(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Start creates the cluster in opts.Dir if needed and starts it on a free loopback port.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("cluster folder: %w", err)
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, sock, err := makeFolders(dir, cred)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, SocketDir: sock, done: make(chan error, 1)}
	if err := createCluster(ctx, bin, dir, opts.StandbyOf, cred); err != nil {
		return nil, err
	}
	// A server left running by a killed process holds the folder: stop it first.
	c.stopStale(bin, cred)
	if err := c.startOnFreePort(ctx, bin, opts, cred); err != nil {
		return nil, err
	}
	return c, nil
}

// startTries is how many ports Start tries before it gives up.
const startTries = 3

// errExitedAtStart is why a server that stopped before it answered is started again.
var errExitedAtStart = errors.New("postgres exited at start")

// startOnFreePort starts the server and waits until it answers, on another port when it
// exits at start: a port is free only when it is picked, and until the server binds it
// another process (the server of another test package) may take it.
func (c *Cluster) startOnFreePort(ctx context.Context, bin string, opts Options, cred *syscall.Credential) error {
	var err error
	for range startTries {
		if c.Port, err = pickPort(); err != nil {
			return err
		}
		if err = c.startServer(bin, opts, cred); err != nil {
			return err
		}
		go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(c.cmd, c.done)
		if err = c.waitReady(ctx); err == nil {
			return nil
		}
		if !errors.Is(err, errExitedAtStart) {
			_ = c.Stop()
			return err
		}
		// The server is gone; its socket folder stays for the next one.
		if c.logFile != nil {
			c.logFile.Close()
			c.logFile = nil
		}
		c.done = make(chan error, 1)
	}
	os.RemoveAll(c.SocketDir)
	return err
}

// makeFolders creates the cluster's folder and a private socket folder, both owned by the
// server's user cred when the server runs as another user. It returns the cluster's folder
// as used: one the server's user can reach, in the system's temporary folder if dir is not.
func makeFolders(dir string, cred *syscall.Credential) (clusterDir, sock string, err error) {
	if cred != nil && !traversable(filepath.Dir(dir)) {
		// The server runs as postgres, which cannot reach a folder under, say, /root: keep
		// the cluster in the system's temporary folder instead, under a name tied to dir.
		dir = filepath.Join(os.TempDir(), "settle-pg-"+strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_"))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", fmt.Errorf("create cluster folder: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", "", fmt.Errorf("create cluster folder: %w", err)
	}
	sock, err = os.MkdirTemp("", "settle-pg-")
	if err != nil {
		return "", "", fmt.Errorf("create socket folder: %w", err)
	}
	if cred != nil {
		for _, d := range []string{dir, sock} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return "", "", fmt.Errorf("give %s to the postgres user: %w", d, err)
			}
		}
	}
	return dir, sock, nil
}

// createCluster fills an empty cluster folder: a base backup of the primary standbyOf when
// it is set, else a new cluster from initdb. A folder that already holds a cluster is kept.
func createCluster(ctx context.Context, bin, dir, standbyOf string, cred *syscall.Credential) error {
	_, err := os.Stat(filepath.Join(dir, "PG_VERSION"))
	switch {
	case err != nil && standbyOf != "":
		return baseBackup(ctx, bin, dir, standbyOf, cred)
	case err != nil:
		initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", dir, "-U", "postgres",
			"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := initdb.CombinedOutput(); err != nil {
			return fmt.Errorf("initdb in %s: %w: %s", dir, err, lastLine(out))
		}
	}
	return nil
}

// startServer starts postgres on the cluster's folder, port and socket folder with the
// settings opts asks for, its output going to opts.Log or to server.log in the folder.
func (c *Cluster) startServer(bin string, opts Options, cred *syscall.Credential) error {
	args := []string{"-D", c.Dir, "-p", strconv.Itoa(c.Port), "-k", c.SocketDir, "-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200", "-c", "shared_buffers=128MB"}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for k, v := range opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	// Pdeathsig stops the server if this process dies without calling Stop.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	logf := opts.Log
	if logf == nil {
		var err error
		if logf, err = os.OpenFile(filepath.Join(c.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return fmt.Errorf("server log: %w", err)
		}
		c.logFile = logf
	}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	return nil
}

// URL returns a connection string for database db on this cluster.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Stop shuts the server down (fast shutdown: open sessions are ended) and waits for it.
func (c *Cluster) Stop() error {
	defer os.RemoveAll(c.SocketDir)
	if c.logFile != nil {
		defer c.logFile.Close()
	}
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("postgres did not stop in 30s; killed")
	}
}

func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-c.done:
			c.done <- err
			return fmt.Errorf("%w (%v) on port %d; see %s", errExitedAtStart, err, c.Port, filepath.Join(c.Dir, "server.log"))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = c.answers(ctx); last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("postgres not ready after 60s: %w", last)
}

// answers reports whether this cluster's server answers on its port: another process's
// server may have taken the port, and answers there until this one gives up binding it.
func (c *Cluster) answers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return fmt.Errorf("read the data directory: %w", err)
	}
	if filepath.Clean(dir) != filepath.Clean(c.Dir) {
		return fmt.Errorf("port %d is another server's (its data is in %s)", c.Port, dir)
	}
	return nil
}

func (c *Cluster) stopStale(bin string, cred *syscall.Credential) {
	pidFile := filepath.Join(c.Dir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	p, err := os.FindProcess(pid)
	if err != nil || p.Signal(syscall.Signal(0)) != nil {
		return
	}
	_ = p.Signal(syscall.SIGINT)
	for i := 0; i < 300; i++ {
		if p.Signal(syscall.Signal(0)) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serverUser returns the credential to run the server with: nil for a normal user, the
// postgres user when running as root (initdb and postgres refuse root).
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres user to run the server (install the Debian package postgresql): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// traversable reports whether every folder from / down to dir lets other users through.
func traversable(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return !os.IsNotExist(err) || traversable(filepath.Dir(d))
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}

// pickPort picks the port a new server binds; a test hands it a taken one.
var pickPort = freePort

// freePort returns a loopback port nothing listens on, drawn below the kernel's ephemeral
// range (32768 and up on Linux): the server binds it only later, and a port the kernel
// hands out for "127.0.0.1:0" may meanwhile be handed to any other listener or outgoing
// connection of the machine's tests.
func freePort() (int, error) {
	for range 50 {
		port := 20000 + rand.IntN(12000)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
