package refund

import "github.com/settle-dev/settle/ops"

// Kind is the refund kind as the program registers it with the ledger. Stripe keeps the
// provider key, so a resend after an uncertain attempt replays the first result and is
// safe within the key's retention; Stripe lists the refunds of a payment, so an operation
// is looked up before it fails after such an attempt, and once the retention ended a
// lookup that finds nothing closes it as not executed (ops rules 5 and 11).
func Kind() ops.KindSpec {
	return ops.KindSpec{Kind: ops.KindRefund, Name: "Refund",
		Policy: ops.Policy{RetryUncertain: true, HasLookup: true}, Lookup: ops.LookupPaymentRecords,
		RecordHint: "re_...", NotExecuted: true, Customer: CustomerStatus}
}
