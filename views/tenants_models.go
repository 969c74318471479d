package views

// TenantsPage is the tenants page: each tenant's LLM budget against what its calls of the
// current UTC day cost so far, and, for admins, a form per tenant to set or remove it.
type TenantsPage struct {
	Viewer Viewer
	Flash  Flash
	// Day is the UTC day whose spend the page shows, Resets the moment its budgets are whole
	// again (the next midnight UTC), with how long until then.
	Day, Resets string
	// Currency is the code of the price table's currency, in which budgets and spends count.
	Currency string
	// CanEdit offers the budget forms: admins only; the server checks every post again.
	CanEdit bool
	// RefusalsUnread says the requests refused for what is left of a budget could not be
	// counted in time: a tenant they stop shows within its budget.
	RefusalsUnread bool
	Tenants        []TenantRow
}

// TenantRow is one tenant of the tenants page.
type TenantRow struct {
	ID, Name string
	// Budget is the budget a UTC day as money, or "none"; Spent what the day's calls cost so
	// far; Used the share of the budget spent, "" without a budget.
	Budget, Spent, Used string
	// Refused says new calls are refused now: the day's spend reached the budget.
	Refused bool
	// TooSmall, when not "", says new calls are refused though the budget is not spent: what
	// is left cannot pay for the calls the tenant makes (most of its recent requests were
	// refused so), and what to do.
	TooSmall string
	// SpendUnknown says the day's spend was not read whole and what was read is short of the
	// budget: whether new calls are refused is the budget check's to say.
	SpendUnknown bool
	// StripeAccount is the connected account the tenant is bound to, "" for none;
	// Approvals its own approval settings, as 'settle tenant list' writes them.
	StripeAccount, Approvals string
	// FormBudget is what the budget field holds: the budget as it is typed, or what the
	// person typed when it was refused, with FormError saying why.
	FormBudget, FormError string
}
