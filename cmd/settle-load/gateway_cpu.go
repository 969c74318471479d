package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clusterCPU returns the processor time the cluster whose data folder is dir has used so
// far: its postmaster's and its children's (backends, WAL writer, checkpointer ...); a
// backend that has exited is no longer counted, and Settle's pool keeps its connections.
func clusterCPU(dir string) time.Duration {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	postmaster, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	_, total, _ := procStat(postmaster)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, cpu, ok := procStat(pid); ok && ppid == postmaster {
			total += cpu
		}
	}
	return total
}

// ownCPU is this process's user and system time so far: the load generator's and the
// fakes', which share the machine with what they measure.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPressure returns how long, since the machine started, at least one of its tasks was
// ready to run but waited for a CPU: the "some" total of /proc/pressure/cpu (Linux's
// pressure stall information); 0 where the kernel does not keep it.
func cpuPressure() time.Duration {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "total="); ok {
			us, _ := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond
		}
	}
	return 0
}

// walSyncs returns how many times the cluster has flushed its WAL to disk since its start.
// Each backend adds its own flushes to the figure when it reports its statistics, at most
// a second after a transaction or ten seconds after it went idle, so a phase's count may
// take in flushes of the moments before it.
func walSyncs(ctx context.Context, w *world) int64 {
	var n int64
	_ = w.db.Pool.QueryRow(ctx, "SELECT wal_sync FROM pg_stat_wal").Scan(&n)
	return n
}
