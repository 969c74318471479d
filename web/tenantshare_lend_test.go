package web

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAFollowLendsItsPlaceAndATenantNeverHoldsTwiceItsShare: a request that only follows a
// background response lends its place to the tenant's reads, cancels and conditional calls
// (the calls told they may start no generation), never to a route that lends nothing; a
// tenant never holds more than twice its share; each place is released once, and a tenant
// whose requests all ended holds nothing.
func TestAFollowLendsItsPlaceAndATenantNeverHoldsTwiceItsShare(t *testing.T) {
	ts := newTenantShare(&Server{MaxInFlightPerTenant: 2, Registry: prometheus.NewRegistry()})
	const tenant = 7
	a, b := ts.take(tenant, lendCall), ts.take(tenant, lendCall)
	if a == nil || b == nil || a.lent || b.lent {
		t.Fatalf("the share's first two calls: %+v %+v, want places of their own", a, b)
	}
	if ts.take(tenant, lendRead) != nil || ts.take(tenant, lendCall) != nil {
		t.Fatal("with no follow, a read or a call beyond the share was let in")
	}
	a.follow()
	a.follow() // told twice, counted once
	if ts.take(tenant, lendNone) != nil {
		t.Error("a route that lends nothing was let in on a follow's place")
	}
	call := ts.take(tenant, lendCall)
	if call == nil || !call.lent {
		t.Fatalf("a call on a follow's place: %+v, want let in, told it may start no generation", call)
	}
	if ts.take(tenant, lendRead) != nil {
		t.Error("one follow lent two places")
	}
	b.follow()
	read := ts.take(tenant, lendRead)
	if read == nil || read.lent {
		t.Fatalf("a read on the second follow's place: %+v", read)
	}
	// Four places, twice the share: the two follows and what they lent.
	if ts.take(tenant, lendRead) != nil {
		t.Error("the tenant holds more than twice its share")
	}
	call.follow() // a retry that goes on following a response already created
	if ts.take(tenant, lendRead) != nil {
		t.Error("a lent place that follows took the tenant beyond twice its share")
	}
	for _, sl := range []*shareSlot{a, b, call, read} {
		sl.release()
	}
	if n := len(ts.inFlight); n != 0 {
		t.Fatalf("a tenant whose requests all ended still holds %+v", ts.inFlight[tenant])
	}
	if x, y := ts.take(tenant, lendNone), ts.take(tenant, lendNone); x == nil || y == nil || ts.take(tenant, lendNone) != nil {
		t.Error("once every place was released, the tenant does not hold exactly its share again")
	}
}
