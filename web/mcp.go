package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/mcptool"
)

// MCPDeps are the dependencies of the MCP server at /mcp. Its tools call s.Refunds, the
// refund tool behind POST /api/v1/refunds, so both take one code path.
type MCPDeps struct {
	// RefundStatus is what refund_status reads; without it /mcp is not served.
	RefundStatus mcptool.StatusStore
}

// mcpMaxBody bounds one MCP request body, as the SDK's own default does.
const mcpMaxBody = mcp.DefaultMaxRequestBodyBytes

// tenantInfoKey is where the tenant travels inside the SDK's token info.
const tenantInfoKey = "settle_tenant"

// mountMCP serves the refund tools over the streamable HTTP transport, behind the same
// bearer tokens as the JSON API.
func (s *Server) mountMCP(r chi.Router) {
	if s.RefundStatus == nil || s.Refunds == nil {
		return
	}
	tools := &mcptool.Tools{Refunds: s.Refunds, Status: s.RefundStatus, Tenant: tenantFromTokenInfo, Logger: s.Logger}
	srv := tools.NewServer()
	// Stateless: every POST stands alone, so any replica can answer any call and nothing is
	// lost on restart; the tools need no server-to-client requests. Plain JSON answers keep
	// the endpoint usable with curl. The SDK's DNS-rebinding guard is off because every
	// call needs a tenant token a rebinding page cannot have, and the guard would refuse
	// all calls through a reverse proxy on the same host.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.Logger, MaxRequestBodyBytes: mcpMaxBody,
			DisableLocalhostProtection: true})
	// mcpToken refuses a bad token as problem+json, like every API route; the SDK's
	// middleware then carries the tenant to the tool handlers as token info.
	bearer := auth.RequireBearerToken(tokenInfoFromTenant, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	// The tenant's share is checked before the SDK's refusals are watched for: a call refused
	// there is recorded once, by the share's refusal, as the tool calls the SDK refuses are.
	r.With(s.shedder.limit, s.mcpToken, bearer, s.share.limit(s.refuseMCP(tools)), s.mcpRefusals(tools)).Handle("/mcp", h)
}

// mcpToken is requireToken for /mcp: the same tokens resolved by Accounts.TenantByToken,
// refused by s.Error as problem+json (isAPI counts /mcp) with the statuses of every route.
func (s *Server) mcpToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		var t *ops.Tenant
		var err error = ops.Errorf(ops.EUNAUTHORIZED, "Send an API token as 'Authorization: Bearer stl_...'.")
		if ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
			t, err = s.Accounts.TenantByToken(r.Context(), strings.TrimSpace(token))
		}
		if err != nil {
			s.Error(w, r, ops.NothingSent(err, callAgainNote))
			return
		}
		next.ServeHTTP(w, r.WithContext(withTenant(r.Context(), t)))
	})
}

// tokenInfoFromTenant turns the tenant requireToken found into the SDK's token info. The
// user id ties any session to its tenant.
func tokenInfoFromTenant(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
	t := tenantFrom(r.Context())
	if t == nil {
		return nil, fmt.Errorf("no tenant for this token: %w", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: "tenant:" + strconv.FormatInt(t.ID, 10), Extra: map[string]any{tenantInfoKey: t}}, nil
}

// tenantFromTokenInfo is the tools' TenantFunc over HTTP.
func tenantFromTokenInfo(_ context.Context, req *mcp.CallToolRequest) (*ops.Tenant, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if t, ok := req.Extra.TokenInfo.Extra[tenantInfoKey].(*ops.Tenant); ok {
			return t, nil
		}
	}
	return nil, errors.New("mcp: tool call without a tenant")
}
