package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/llm"
	"github.com/settle-dev/settle/views"
)

// TenantBudgets reads the tenants with what their LLM calls of a day cost, and sets a
// tenant's LLM budget; ops/pg's DB is one. A change is audited as 'settle tenant budget'
// audits it.
type TenantBudgets interface {
	// TenantDays lists every tenant with its settings and what its LLM operations opened on
	// the UTC day that starts at day cost in currency: the figure its budget check reads, as
	// far as the read got within bound.
	TenantDays(ctx context.Context, day time.Time, currency string, bound ops.SpendBound) ([]ops.TenantDay, error)
	// SetTenantLLMBudget sets the tenant's budget per UTC day in micro-units (0: none).
	SetTenantLLMBudget(ctx context.Context, tenantID, micros int64, actor string, now time.Time) (ops.BudgetChange, error)
}

// TenantsDeps are the dependencies of the tenants page. With Tenants nil the page is not
// mounted.
type TenantsDeps struct {
	Tenants TenantBudgets
	// LLMCurrency is the currency of the gateway's price table, in which budgets and spends
	// are counted; "" is dollars, as the price table's default.
	LLMCurrency string
	// SpendBound bounds the page's read of the spends; zero fields are
	// ops.DefaultSpendBound's.
	SpendBound ops.SpendBound
}

// mountTenants adds the tenants page: managers read it, as they read the other pages of
// money; admins change budgets. It runs inside the session group.
func (s *Server) mountTenants(r chi.Router) {
	if s.Tenants == nil {
		return
	}
	s.forRole(r, desk.RoleManager).Get("/tenants", s.handleTenants)
	s.forRole(r, desk.RoleAdmin).Post("/tenants/{id}/budget", s.handleTenantBudget)
}

// refusedBudget is an admin's budget the page refused: the tenant, what was typed, and why.
type refusedBudget struct {
	tenantID      int64
	typed, reason string
}

func (s *Server) handleTenants(w http.ResponseWriter, r *http.Request) {
	s.renderTenants(w, r, http.StatusOK, s.popFlash(r.Context()).view(), refusedBudget{})
}

func (s *Server) renderTenants(w http.ResponseWriter, r *http.Request, status int, f views.Flash, refused refusedBudget) {
	ctx := r.Context()
	currency := s.llmCurrency()
	now := s.Clock.Now().UTC()
	day := now.Truncate(24 * time.Hour)
	days, err := s.Tenants.TenantDays(ctx, day, currency, s.SpendBound)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	stops, unread := s.tooSmallStops(ctx, now, days)
	resets := day.Add(24 * time.Hour)
	me := userFrom(ctx)
	m := views.TenantsPage{Viewer: viewer(me), Flash: f, Day: day.Format(time.DateOnly), Currency: strings.ToUpper(currency),
		Resets: resets.Format("2006-01-02 15:04 UTC") + " (in " + untilText(resets.Sub(now)) + ")", CanEdit: me.Role.AtLeast(desk.RoleAdmin),
		RefusalsUnread: unread}
	for _, d := range days {
		row := tenantRow(d, currency, s.SpendBound)
		if sh, ok := stops[d.Tenant.ID]; ok && !row.Refused && d.Tenant.LLMBudgetMicros > 0 {
			row.TooSmall = tooSmallText(d, sh, currency)
		}
		if d.Tenant.ID == refused.tenantID {
			row.FormBudget, row.FormError = refused.typed, refused.reason
		}
		m.Tenants = append(m.Tenants, row)
	}
	s.render(w, r, status, views.Tenants(m))
}

// tenantRow is one tenant's row: its budget and spend as the dashboard writes money. A spend
// the bounded read did not sum whole is said so, never shown as the day's (ops rule 12): a
// floor of it, or nothing, and the tenant shown refused only when the floor reaches its budget.
func tenantRow(d ops.TenantDay, currency string, bound ops.SpendBound) views.TenantRow {
	t := d.Tenant
	row := views.TenantRow{ID: strconv.FormatInt(t.ID, 10), Name: t.Name, Budget: "none", Spent: ops.FormatMicrosExact(d.Spent, currency),
		StripeAccount: t.StripeAccount, Approvals: approvalsText(d.Approvals), FormBudget: "off"}
	switch d.Read {
	case ops.SpendAtLeast:
		row.Spent = fmt.Sprintf("at least %s (more than %d calls today, not summed further; the budget check still applies)",
			row.Spent, bound.OrDefault().Calls)
	case ops.SpendNotRead:
		row.Spent = "spend not read (too slow); the budget check still applies"
	}
	if b := t.LLMBudgetMicros; b > 0 {
		row.Budget, row.FormBudget = ops.FormatMicrosExact(b, currency), llm.BudgetAmount(b)
		row.Refused = d.Read != ops.SpendNotRead && d.Spent >= b
		row.SpendUnknown = d.Read != ops.SpendWhole && !row.Refused
		if d.Read == ops.SpendWhole {
			// Rounded down, so a spend short of its budget never reads as 100 %.
			used := math.Floor(float64(d.Spent)*1000/float64(b)) / 10
			row.Used = strconv.FormatFloat(used, 'f', -1, 64) + " %"
		}
	}
	return row
}

// approvalsText writes a tenant's own approval settings (ops rule 13), what 'settle tenant
// list' shows, in words: "server's" where the tenant keeps the server's setting.
func approvalsText(a *ops.TenantApprovals) string {
	if a == nil {
		return "server's"
	}
	min, notExec := "server's", "server's"
	switch {
	case a.MinOff:
		min = "off"
	case a.MinCents != nil:
		min = "from " + strconv.FormatInt(*a.MinCents, 10) + " minor units"
	}
	if a.NotExecuted != nil {
		notExec = map[bool]string{true: "needs approval", false: "no approval"}[*a.NotExecuted]
	}
	return "threshold " + min + "; not executed: " + notExec
}

// untilText writes how long until a moment of the coming day: "3 h 12 min", "40 min".
func untilText(d time.Duration) string {
	mins := int(d.Round(time.Minute) / time.Minute)
	if mins < 60 {
		return strconv.Itoa(mins) + " min"
	}
	return fmt.Sprintf("%d h %d min", mins/60, mins%60)
}

// llmCurrency is the price table's currency, in which budgets and spends are counted.
func (s *Server) llmCurrency() string {
	return (&llm.PriceTable{Currency: s.LLMCurrency}).CurrencyOf()
}

// handleTenantBudget sets or removes a tenant's LLM budget, with the validation and the audit
// row of 'settle tenant budget'. A budget that is no amount is refused on the page, with what
// was typed and why, and changes nothing; so does a tenant id that names no tenant.
func (s *Server) handleTenantBudget(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	ctx := r.Context()
	id, err := pathID(r, "tenant")
	if err != nil {
		s.Error(w, r, err)
		return
	}
	typed := strings.TrimSpace(r.PostForm.Get("budget"))
	micros, err := llm.ParseBudget(typed)
	if err != nil {
		msg := "The budget was not changed: " + ops.ErrorMessage(err) + "."
		s.renderTenants(w, r, http.StatusUnprocessableEntity, views.Flash{Kind: "error", Message: msg}, refusedBudget{id, typed, msg})
		return
	}
	c, err := s.Tenants.SetTenantLLMBudget(ctx, id, micros, actor(r), s.Clock.Now())
	if err != nil {
		s.Error(w, r, err)
		return
	}
	// This server's gateway reads a tenant's budget with its token; the cache is dropped so
	// that the change applies here from the next call. Other servers apply it once their
	// entry ends (TokenCache.TTL).
	if tc, ok := s.Accounts.(*TokenCache); ok {
		tc.Forget()
	}
	s.putFlash(ctx, flashMsg{Kind: "ok", Message: s.budgetChanged(c)})
	http.Redirect(w, r, "/tenants", http.StatusSeeOther)
}

// budgetChanged says what a budget change did, in the page's words.
func (s *Server) budgetChanged(c ops.BudgetChange) string {
	now := "no LLM budget: its calls are not capped"
	if b := c.Tenant.LLMBudgetMicros; b > 0 {
		now = "an LLM budget of " + ops.FormatMicrosExact(b, s.llmCurrency()) + " a UTC day; new calls past it are refused until the next midnight UTC"
	}
	if !c.Changed {
		now += "; nothing changed"
	}
	return fmt.Sprintf("Tenant %s has %s.", c.Tenant.Name, now)
}
