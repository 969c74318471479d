package main

import (
	"maps"
	"testing"
)

func TestLoadKeyScopes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		def     string
		tenants map[string]string
	}{
		{"", "tenant", nil},
		{"user", "user", nil},
		{"tenant, acme=user ,shop=tenant", "tenant", map[string]string{"acme": "user", "shop": "tenant"}},
		{"acme=user", "tenant", map[string]string{"acme": "user"}},
	} {
		var l LLMConfig
		if err := loadKeyScopes(&l, tc.in); err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if l.KeyScope != tc.def || !maps.Equal(l.TenantKeyScopes, tc.tenants) {
			t.Errorf("%q: default %q, tenants %v; want %q, %v", tc.in, l.KeyScope, l.TenantKeyScopes, tc.def, tc.tenants)
		}
	}
}
