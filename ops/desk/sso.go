package desk

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/settle-dev/settle/ops"
)

// RoleMap gives the Settle role of each group (or other claim value) an identity provider
// names; a group it does not list gives no role.
type RoleMap map[string]Role

// ParseRoleMap reads "group=role,group=role". A group may be named once; a group holding an
// '=' or ',' cannot be written, which no provider's group names need.
func ParseRoleMap(s string) (RoleMap, error) {
	m := RoleMap{}
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		group, role, ok := strings.Cut(pair, "=")
		group, role = strings.TrimSpace(group), strings.TrimSpace(role)
		if !ok || group == "" {
			return nil, fmt.Errorf("%q is not group=role", pair)
		}
		if !Role(role).Valid() {
			return nil, fmt.Errorf("%q: unknown role %q; use one of support, oncall, manager, admin", pair, role)
		}
		if _, dup := m[group]; dup {
			return nil, fmt.Errorf("group %q is mapped twice", group)
		}
		m[group] = Role(role)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("no group is mapped to a role")
	}
	return m, nil
}

// RoleFor returns the most powerful role any of groups maps to, and false when none maps to
// one: a person in several groups gets everything the strongest allows, as each group
// alone would have given them that much.
func (m RoleMap) RoleFor(groups []string) (Role, bool) {
	best, found := Role(""), false
	for _, g := range groups {
		r, ok := m[g]
		if ok && (!found || r.rank() > best.rank()) {
			best, found = r, true
		}
	}
	return best, found
}

// ExternalIdentity is a person as an identity provider vouched for them: Issuer and Subject
// say who they are for good, Email is only what to show.
type ExternalIdentity struct {
	Issuer  string
	Subject string
	Email   string
}

// ExternalSignIn is the outcome of a sign-in through an identity provider.
type ExternalSignIn struct {
	User *User
	// Created is true on the person's first sign-in.
	Created bool
	// PreviousRole is the role before this sign-in changed it; empty when it did not.
	PreviousRole Role
}

// ExternalUsers keeps the users an identity provider vouches for.
type ExternalUsers interface {
	// SignInExternal returns the user of the identity, creating it with role on the first
	// sign-in and setting its role to role on later ones, each change audited with actor
	// "oidc:" followed by the issuer. A disabled user is EFORBIDDEN; an email another user
	// already holds is ECONFLICT, since an email alone never links two identities.
	SignInExternal(ctx context.Context, id ExternalIdentity, role Role, now time.Time) (ExternalSignIn, error)
}

// ErrUserDisabled is the refusal of a disabled user's sign-in.
func ErrUserDisabled() error {
	return ops.Errorf(ops.EFORBIDDEN, "Your Settle account is disabled. Ask a Settle admin to enable it.")
}
