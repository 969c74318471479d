package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// replica is one `settle serve` process, named by its SETTLE_WORKER_ID, or another server
// process of the run (the gateway benchmark's reverse proxy).
type replica struct {
	name, addr string
	cmd        *exec.Cmd
	exited     chan struct{}
	killed     atomic.Bool
	peakKB     atomic.Int64 // the largest VmHWM read
}

// startReplica starts `settle serve` on addr, its output into the run's folder, and waits
// until it answers /healthz.
func (w *world) startReplica(ctx context.Context, name, addr string) (*replica, error) {
	return w.startServer(ctx, name, addr, append(slices.Clip(w.env), "SETTLE_WORKER_ID="+name), w.cfg.settleBin, "serve", "--addr", addr)
}

// startServer starts bin with args and env beside the inherited environment, its output
// into the run's folder as name.log, and waits until it answers HTTP on addr.
func (w *world) startServer(ctx context.Context, name, addr string, env []string, bin string, args ...string) (*replica, error) {
	logf, err := os.Create(filepath.Join(w.runDir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r := &replica{name: name, addr: addr, exited: make(chan struct{})}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	// A replica must not outlive the run, also when the run itself is killed.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.exited)
	}()
	w.mu.Lock()
	w.all = append(w.all, r)
	w.mu.Unlock()
	if err := r.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, fmt.Errorf("%s: %w (its log: %s)", name, err, logf.Name())
	}
	return r, nil
}

func (r *replica) url() string { return "http://" + r.addr }

func (r *replica) alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

func (r *replica) waitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(r.url() + "/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if !r.alive() {
			return fmt.Errorf("exited at start")
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("did not answer /healthz in %s: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the replica as a crash would: SIGKILL, nothing flushed, nothing released.
func (r *replica) kill() {
	r.killed.Store(true)
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

// stop asks the replica to shut down with SIGTERM and kills it if it has not within 30 s,
// more than its SETTLE_SHUTDOWN_TIMEOUT (replicaEnv).
func (r *replica) stop() {
	if !r.alive() {
		return
	}
	r.sample()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.exited
	}
}

// sample reads the process's VmHWM, the peak of its resident set, from /proc.
func (r *replica) sample() {
	if !r.alive() {
		return
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err == nil && kb > r.peakKB.Load() {
			r.peakKB.Store(kb)
		}
		return
	}
}

// cpu returns the processor time the process has used so far, user and system; 0 when it
// cannot be read.
func (r *replica) cpu() time.Duration {
	_, cpu, _ := procStat(r.cmd.Process.Pid)
	return cpu
}

// runQueueWait returns how long the process's threads have waited so far, ready to run, for
// a CPU: on a machine shared with other work, time the process lost to it. It is the second
// field of /proc/<pid>/task/<tid>/schedstat, summed over the threads alive now.
func (r *replica) runQueueWait() time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", r.cmd.Process.Pid)
	tasks, _ := os.ReadDir(dir)
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if f := strings.Fields(string(b)); err == nil && len(f) >= 2 {
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// procStat reads the parent of process pid and the processor time it has used so far, user
// and system (the utime and stime fields of /proc/<pid>/stat).
func procStat(pid int) (ppid int, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces and parentheses:
	// count from after the last one.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err != nil || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return ppid, time.Duration(utime+stime) * time.Second / clockTicks, true
}

// clockTicks is the unit of /proc's times, USER_HZ: 100 per second on every Linux
// architecture Go supports.
const clockTicks = 100

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}
