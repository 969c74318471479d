package ops

import "testing"

// TestAProviderKeyNamesItsOperation: a new operation's key is its id's, so the key is unique
// because the id is (rule 3), and an operation found by its key is found by its id. The
// random keys of operations opened before are never of that form, so the two kinds of key
// never meet.
func TestAProviderKeyNamesItsOperation(t *testing.T) {
	a, b := NewOperationID(), NewOperationID()
	if ProviderKeyFor(a) == ProviderKeyFor(b) {
		t.Fatalf("two ids, one key %s", ProviderKeyFor(a))
	}
	if id, ok := ProviderKeyOperation(ProviderKeyFor(a)); !ok || id != a {
		t.Fatalf("the key of %s names %q (%v)", a, id, ok)
	}
	for _, key := range []string{NewProviderKey(), a, "settle_" + a[:35], "settle_" + a + "0", "Settle_" + a,
		"settle_{" + a[:34] + "}", "settle_" + "01234567-89AB-7DEF-8123-456789ABCDEF"} {
		if id, ok := ProviderKeyOperation(key); ok {
			t.Errorf("%q names operation %s, want none", key, id)
		}
	}
}
