package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/mcptool"
	"github.com/settle-dev/settle/ops/pg"
	"github.com/settle-dev/settle/ops/refund"
)

// mcpStdio serves the refund tools to one local agent over stdin and stdout, acting for the
// tenant of the API token in SETTLE_MCP_TOKEN. Logs go to the logger (stderr): stdout
// carries the protocol.
func mcpStdio(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	return serveMCPStdio(ctx, cfg, cfg.MCPToken, stdin, stdout, logger)
}

// serveMCPStdio is mcpStdio with the token given, so tests need no environment.
func serveMCPStdio(ctx context.Context, cfg Config, token string, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	run := stdioRun{Config: cfg, Clock: ops.SystemClock{}, SkewInterval: ops.DefaultSkewInterval, Token: token, Logger: logger}
	return run.serve(ctx, stdin, stdout)
}

// stdioRun is one stdio server: its settings, the clock it judges leases by (a test's may
// run off the database's) and how often it checks that clock again.
type stdioRun struct {
	Config       Config
	Clock        ops.Clock
	SkewInterval time.Duration
	Token        string
	Logger       *slog.Logger
}

// serve opens its own database pool and refund tool, wired as 'settle serve' wires them, so
// a call over stdio takes the same path as POST /api/v1/refunds. Stalled operations it
// leaves behind are picked up by the reaper of 'settle serve'.
func (r stdioRun) serve(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	cfg, token, logger := r.Config, r.Token, r.Logger
	if token = strings.TrimSpace(token); token == "" {
		return usagef("mcp --stdio: set %s to an API token made with 'settle token add'", envMCPToken.Name)
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	// Its refunds take operation leases and judge others' by r.Clock, as serve's do
	// (ops rule 11): refuse a clock off the database's now, and gate admissions while it
	// drifts.
	if err := checkClock(ctx, cfg, r.Clock, db); err != nil {
		return fmt.Errorf("mcp --stdio: %w", err)
	}
	if err := db.CheckSchema(ctx); err != nil {
		return err
	}
	guard := newSkewGuard(cfg, db, r.Clock, logger)
	guardCtx, stopGuard := context.WithCancel(ctx)
	guarded := make(chan struct{})
	go func() {
		defer close(guarded)
		guard.Loop(r.SkewInterval).Run(guardCtx)
	}()
	// The loop ends before the pool it reads closes.
	defer func() { stopGuard(); <-guarded }()
	// A bad token stops the server at start; a token revoked later stops each call after
	// (tokenTenant).
	tenant, err := db.TenantByToken(ctx, token)
	if ops.ErrorCode(err) == ops.EUNAUTHORIZED {
		// The CLI prints only the message: it must name the setting to fix.
		return &ops.Error{Code: ops.EUNAUTHORIZED, Err: err, Message: fmt.Sprintf(
			"mcp --stdio: %s is no live API token (unknown or revoked); make one with 'settle token add --tenant NAME'.", envMCPToken.Name)}
	} else if err != nil {
		return fmt.Errorf("mcp --stdio: check %s: %w", envMCPToken.Name, err)
	}
	var refunds mcptool.Refunder = unconfiguredRefunds{ledger: ops.NewLedger(db, r.Clock)}
	if cfg.Stripe.APIKey != "" {
		adapter := cfg.Stripe.adapter(db)
		ledger := ops.NewLedger(db, r.Clock)
		// Leased as serve leases them: the skew limit above is worked out from this lease,
		// and serve's reaper takes over any operation whose lease ran out (ops rule 11).
		ledger.Limits = operationLimits(ledger.Limits, cfg.OperationLease)
		ledger.Gate = guard
		refunds = &refund.Tool{Ledger: ledger, Store: db, Provider: adapter, Deadline: cfg.Stripe.Deadline,
			TenantKey: cfg.Stripe.TenantKey, AnyTenantsPayments: cfg.Stripe.AnyTenantsPayments}
	}
	tools := &mcptool.Tools{Refunds: refunds, Status: db, Tenant: tokenTenant(db, token, logger), Logger: logger}
	// One malformed line would end the SDK's session: the filter answers and drops it, and
	// writes its error replies through the same lock as the SDK's replies.
	out := mcptool.NewSyncWriter(stdout)
	in := mcptool.NewLineFilter(stdin, out, logger)
	in.RecordRefusedCalls(tools)
	transport := tools.Transport(in.Transport(&mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}))
	logger.Info("serving the refund tools on stdio", "tenant", tenant.Name)
	err = tools.NewServer().Run(ctx, transport)
	if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) {
		// The agent hung up or we were told to stop: both are a normal end.
		return nil
	}
	if err != nil {
		return fmt.Errorf("mcp --stdio: %w", err)
	}
	return nil
}

// tokenTenant resolves the token again at every tool call. A stdio server lives as long as
// its agent, for days if need be, and 'settle token revoke' promises that servers refuse a
// revoked token within seconds: a tenant fixed at start would keep refunding for it.
func tokenTenant(db *pg.DB, token string, logger *slog.Logger) mcptool.TenantFunc {
	return func(ctx context.Context, _ *mcp.CallToolRequest) (*ops.Tenant, error) {
		t, err := db.TenantByToken(ctx, token)
		if err != nil {
			// No tenant is named, so nothing is recorded as its request (ops rule 8).
			logger.WarnContext(ctx, "refused a tool call: its API token no longer resolves", "env", envMCPToken.Name, "err", err)
			return nil, fmt.Errorf("check %s: %w", envMCPToken.Name, ops.NothingSent(err, refund.NothingSentNote))
		}
		return t, nil
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
