package desk

import "testing"

func TestRoleMap(t *testing.T) {
	m, err := ParseRoleMap(" settle-support=support, settle-admins = admin ,settle-oncall=oncall,")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		groups []string
		want   Role
		ok     bool
	}{
		{[]string{"settle-oncall"}, RoleOncall, true},
		{[]string{"settle-support", "settle-admins", "settle-oncall"}, RoleAdmin, true},
		{[]string{"staff", "settle-support"}, RoleSupport, true},
		{[]string{"staff", "Settle-Admins"}, "", false},
		{nil, "", false},
	} {
		if got, ok := m.RoleFor(c.groups); got != c.want || ok != c.ok {
			t.Errorf("RoleFor(%v) = %q, %v; want %q, %v", c.groups, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{"", "settle-admins", "=admin", "a=root", "a=admin,a=support"} {
		if _, err := ParseRoleMap(bad); err == nil {
			t.Errorf("ParseRoleMap(%q) accepted", bad)
		}
	}
}
