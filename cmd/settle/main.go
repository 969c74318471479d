// Command settle runs Settle: the dashboard and API server, migrations, the demo, and the
// administration commands. Run 'settle help' for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/settle-dev/settle/internal/logbuf"
	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/reqlog"
)

func main() {
	tuneGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// gcPercent is the garbage collector's target when GOGC is not set. settle's live heap is
// a few MB, so at Go's default of 100 it collects every few requests, and each cycle takes
// a share of the CPU for about a millisecond: that was the largest part of the LLM
// gateway's p99 overhead (docs/benchmarks/journal.md). At 400 the heap still stays within tens of MB.
const gcPercent = 400

// memoryLimit is the soft memory limit when GOMEMLIMIT is not set. gcPercent lets the heap
// grow to five times what is live between collections; when the machine is starved of CPU,
// requests pile up, what is live grows with them, and the heap grew past 150 MB of resident
// memory at 300 gateway calls a second. Near this limit the collector runs more often
// instead, never taking more than about half the CPU (Go's own cap). The limit counts only
// the runtime's memory: the resident set also holds about 40 MB of the binary's own pages,
// so the limit is what is left of 150 MB after them and a margin
// (TestTheMemoryLimitLeavesRoomForTheBinarysPages). At 500 calls a second on a machine not
// starved the heap's goal stays near 40 MB and the limit costs no collection; in a backlog
// it does, in CPU. A soft limit does not bound what is live: when a backlog's live heap
// outgrows it, the heap grows anyway and the collections' CPU slows the answers that would
// shrink the backlog, so an operator who prefers answering to memory sets GOMEMLIMIT higher
// or to off.
const memoryLimit = 90 << 20

// tuneGC sets the garbage collector's target and the soft memory limit, each unless the
// operator chose it with GOGC or GOMEMLIMIT.
func tuneGC(e environ) {
	if e.get(envGOGC) == "" {
		debug.SetGCPercent(gcPercent)
	}
	if e.get(envGOMEMLIMIT) == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}

// Main runs one command line in the environment env ("NAME=value" lines, as os.Environ
// gives them) and returns the process exit status: 0 on success, 1 when the command failed,
// 2 for a mistake on the command line or in the configuration. Errors are printed to stderr
// as one line starting with "settle: ".
func Main(ctx context.Context, args []string, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, usage())
		return 0
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "settle: find the working folder:", err)
		return 1
	}
	// LoadConfig only reads: it opens nothing, so it may run before the names are checked.
	cfg, err := LoadConfig(args, lookup(env), wd)
	if errors.Is(err, flag.ErrHelp) {
		// Help acts on nothing, and it is read precisely when something is wrong.
		fmt.Fprint(stdout, usage())
		return 0
	}
	// The names before any other refusal: a misspelt variable also explains the refusal of
	// a value it left unset.
	if nerr := checkVariableNames(env); nerr != nil {
		err = nerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "settle:", errorLine(err))
		return 2
	}
	// Lines logged while serving a request carry its identifiers (package reqlog).
	logger, closeLog := newLogger(stderr, cfg.LogLevel)
	// Deferred too, so that a panic's unwinding writes what was logged before it.
	defer closeLog()

	err = runCommand(ctx, cfg, logger, stdin, stdout, stderr)
	closeLog()
	if err != nil {
		fmt.Fprintln(stderr, "settle:", errorLine(err))
		var ue *usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// runCommand runs the command cfg names, LoadConfig having checked it is one.
func runCommand(ctx context.Context, cfg Config, logger *slog.Logger, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	switch cfg.Command {
	case "serve":
		err = serve(ctx, cfg, logger)
	case "demo":
		err = demoCmd(ctx, cfg, logger, stdout, stderr)
	case "migrate":
		err = migrate(ctx, cfg, stdout)
	case "user add":
		err = addUser(ctx, cfg, stdin, stdout)
	case "token add":
		err = addToken(ctx, cfg, stdout)
	case "token list":
		err = listTokens(ctx, cfg, stdout)
	case "token revoke":
		err = revokeToken(ctx, cfg, stdout)
	case "tenant stripe-account":
		err = tenantStripeAccount(ctx, cfg, stdout)
	case "tenant approvals":
		err = tenantApprovals(ctx, cfg, stdout)
	case "tenant budget":
		err = tenantBudget(ctx, cfg, stdout)
	case "tenant list":
		err = listTenants(ctx, cfg, stdout)
	case "alerts export":
		err = alertsExport(ctx, cfg.Alerts, stdout)
	case "worker":
		err = workerCmd(ctx, cfg, logger)
	case "reconcile":
		err = reconcileCmd(ctx, cfg, stdout, stderr, logger)
	case "retention run":
		err = retentionCmd(ctx, cfg, stdout, stderr, logger)
	case "mcp":
		err = mcpStdio(ctx, cfg, stdin, stdout, logger)
	case "fake stripe":
		err = fakeStripe(ctx, cfg, logger, stdout)
	case "fake llm":
		err = fakeLLM(ctx, cfg, logger, stdout)
	case "fake anthropic":
		err = fakeAnthropic(ctx, cfg, logger, stdout)
	}
	return err
}

// newLogger returns the logger of a command writing to stderr, and the function that
// writes out what it holds, to be called on every way out of the command. Lines go out in
// batches (package logbuf): one write per access line was a large share of the server's CPU
// under load. Warnings and errors go out at once, with every line before them; a crash loses
// at most the info and debug lines of the last logbuf.Interval. On a terminal a person is
// watching and progress lines are redrawn on the same stream, so each line goes out at once.
func newLogger(stderr io.Writer, level slog.Level) (*slog.Logger, func()) {
	opts := &slog.HandlerOptions{Level: level}
	if isTerminal(stderr) {
		return slog.New(reqlog.Handler(slog.NewTextHandler(stderr, opts))), func() {}
	}
	w := logbuf.New(stderr, logbuf.Interval)
	h := logbuf.Handler(slog.NewTextHandler(w, opts), w)
	return slog.New(reqlog.Handler(h)), func() { _ = w.Close() }
}

// errorLine says what went wrong in one line: the user-safe message for domain errors,
// and the whole chain for others, since the person at the terminal runs the system.
func errorLine(err error) string {
	var e *ops.Error
	if errors.As(err, &e) && e.Code != ops.EINTERNAL {
		return ops.ErrorMessage(err)
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// serve runs the server until ctx is cancelled (SIGINT or SIGTERM) or it fails.
func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	p := NewProgram(cfg, logger)
	if err := p.Run(ctx); err != nil {
		p.Close()
		return err
	}
	logger.Info("serving", "url", p.URL())
	err := p.Wait(ctx)
	if err == nil {
		logger.Info("stopping: no new requests; waiting for those in flight and the background work in hand",
			"timeout", p.ShutdownTimeout())
	}
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	return err
}
