package ops

import "context"

// LatestForIntent returns the newest operation of an intent, whatever its status, or an
// ENOTFOUND error. It is a read, like Get: a flow that keeps an intent under more than one
// key form (the LLM gateway's user scope across the upgrade of its key) asks which form
// already holds the intent before it admits a request under it.
func (l *Ledger) LatestForIntent(ctx context.Context, tenantID int64, kind Kind, intentKey string) (*Operation, error) {
	return l.store.LatestForIntent(ctx, tenantID, kind, intentKey)
}
