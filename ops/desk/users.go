package desk

import (
	"context"
	"time"

	"github.com/settle-dev/settle/ops"
)

// Role is what a dashboard user may do. Each role includes everything of the ones before it.
type Role string

// The roles, from least to most.
const (
	RoleSupport Role = "support"
	RoleOncall  Role = "oncall"
	RoleManager Role = "manager"
	RoleAdmin   Role = "admin"
)

// Roles lists every role from least to most.
var Roles = []Role{RoleSupport, RoleOncall, RoleManager, RoleAdmin}

func (r Role) rank() int {
	for i, v := range Roles {
		if v == r {
			return i
		}
	}
	return -1
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r.rank() >= 0 }

// AtLeast reports whether r includes everything min may do.
func (r Role) AtLeast(min Role) bool { return r.Valid() && r.rank() >= min.rank() }

// User is a person who signs in to the dashboard.
type User struct {
	ID        int64
	Email     string
	Role      Role
	CreatedAt time.Time
	// SessionGeneration counts the times every session of the user was ended (a disable).
	// A session keeps the generation it was signed in under and works under that one only:
	// a request in flight at the disable may write its session back, and that session must
	// stay ended when the account is enabled again.
	SessionGeneration int64
}

// Accounts keeps the dashboard's users, and the tenants and API tokens it administers.
type Accounts interface {
	ops.TenantStore
	// CreateUser adds a user; the password is hashed before it is stored.
	CreateUser(ctx context.Context, email, password string, role Role) (*User, error)
	// Authenticate returns the user with that email and password, or EUNAUTHORIZED.
	Authenticate(ctx context.Context, email, password string) (*User, error)
	// UserByID returns one user or ENOTFOUND.
	UserByID(ctx context.Context, id int64) (*User, error)
}
