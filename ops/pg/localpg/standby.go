package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// baseBackup fills the empty folder dir with a copy of the running server at from, set up to
// follow it as a streaming standby: pg_basebackup -R writes standby.signal and a
// primary_conninfo made of from's parameters, application_name included. The default
// pg_hba.conf of a trust cluster already lets 127.0.0.1 replicate, and wal_level and
// max_wal_senders default to what streaming needs.
func baseBackup(ctx context.Context, bin, dir, from string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_basebackup"), "-D", dir, "-d", from, "-R",
		"--checkpoint=fast", "--wal-method=stream", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup into %s: %w: %s", dir, err, lastLine(out))
	}
	return nil
}

// Promote ends a standby's recovery and waits until it takes writes, as a failover does
// (pg_promote, the SQL form of pg_ctl promote).
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("promote: connect to the standby: %w", err)
	}
	defer conn.Close(ctx)
	var done bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(true, 30)`).Scan(&done); err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	if !done {
		return errors.New("promote: the standby still recovers after 30 s")
	}
	return nil
}

// StopImmediate stops the server the way a crash does (pg_ctl stop -m immediate): sessions
// are cut at once, nothing is checkpointed. Failover tests lose a primary with it. Stop may
// still be called afterwards and returns at once.
func (c *Cluster) StopImmediate() error {
	defer os.RemoveAll(c.SocketDir)
	if c.logFile != nil {
		defer c.logFile.Close()
	}
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case err := <-c.done:
		c.done <- err
		return nil
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		c.done <- <-c.done
		return errors.New("postgres did not stop in 30s after SIGQUIT; killed")
	}
}

// WaitSynchronous waits until this primary streams to the standby called name as its
// synchronous standby: from then on a commit is acknowledged only once the standby has it,
// which is what makes a failover lose nothing acknowledged. A standby that has just started
// streams for a moment before the primary counts it synchronous.
func (c *Cluster) WaitSynchronous(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the primary: %w", err)
	}
	defer conn.Close(ctx)
	var state string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err := conn.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = $1`, name).Scan(&state)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read the replication state of %s: %w", name, err)
		}
		if state == "sync" {
			return nil
		}
	}
	return fmt.Errorf("standby %s is not synchronous after 30 s (state %q)", name, state)
}
