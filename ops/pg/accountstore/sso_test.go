package accountstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/settle-dev/settle/ops"
	"github.com/settle-dev/settle/ops/desk"
	"github.com/settle-dev/settle/ops/pg/accountstore"
	"github.com/settle-dev/settle/ops/pg/deskstore"
	"github.com/settle-dev/settle/ops/pg/pgtest"
)

// A provider's person is keyed by issuer and subject: the first sign-in creates the user,
// a later one with other groups changes its role, each audited; the same email from
// another subject, a disabled user and a missing email are refused and change nothing.
func TestSignInExternal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	db := accountstore.New(pool)
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	id := desk.ExternalIdentity{Issuer: "https://idp.example.com", Subject: "sub-1", Email: "Olga@Corp.example"}

	in, err := db.SignInExternal(ctx, id, desk.RoleSupport, now)
	if err != nil || !in.Created || in.User.Email != "olga@corp.example" || in.User.Role != desk.RoleSupport || in.PreviousRole != "" {
		t.Fatalf("first sign-in: %+v, %v", in, err)
	}
	again, err := db.SignInExternal(ctx, id, desk.RoleSupport, now)
	if err != nil || again.Created || again.User.ID != in.User.ID || again.PreviousRole != "" {
		t.Fatalf("second sign-in: %+v, %v", again, err)
	}
	moved, err := db.SignInExternal(ctx, id, desk.RoleManager, now)
	if err != nil || moved.User.Role != desk.RoleManager || moved.PreviousRole != desk.RoleSupport {
		t.Fatalf("sign-in with new groups: %+v, %v", moved, err)
	}
	if _, err := db.Authenticate(ctx, "olga@corp.example", ""); ops.ErrorCode(err) != ops.EUNAUTHORIZED {
		t.Fatalf("a provider's user signs in with a password: %v", err)
	}

	other := desk.ExternalIdentity{Issuer: id.Issuer, Subject: "sub-2", Email: "olga@corp.example"}
	if _, err := db.SignInExternal(ctx, other, desk.RoleAdmin, now); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("another subject with the same email: %v, want conflict", err)
	}
	if _, err := db.CreateUser(ctx, "pat@corp.example", "correct horse battery", desk.RoleSupport); err != nil {
		t.Fatal(err)
	}
	pat := desk.ExternalIdentity{Issuer: id.Issuer, Subject: "sub-pat", Email: "pat@corp.example"}
	if _, err := db.SignInExternal(ctx, pat, desk.RoleAdmin, now); ops.ErrorCode(err) != ops.ECONFLICT {
		t.Fatalf("a password user's email from the provider: %v, want conflict", err)
	}
	if _, err := db.SignInExternal(ctx, desk.ExternalIdentity{Issuer: id.Issuer, Subject: "sub-3"}, desk.RoleAdmin, now); ops.ErrorCode(err) != ops.EINVALID {
		t.Fatalf("no email: %v, want invalid", err)
	}

	if err := db.SetUserDisabled(ctx, in.User.ID, true, "admin@corp.example", now); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SignInExternal(ctx, id, desk.RoleAdmin, now); ops.ErrorCode(err) != ops.EFORBIDDEN {
		t.Fatalf("a disabled user: %v, want forbidden", err)
	}
	u, err := db.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) != 2 || u[0].Role != desk.RoleManager {
		t.Fatalf("users after the refusals: %+v", u)
	}
	for action, want := range map[string]int{"user.add": 1, "user.role": 1} {
		p, err := deskstore.New(pool).AuditLog(ctx, desk.AuditFilter{Action: action, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) != want || p.Entries[0].Actor != "oidc:"+id.Issuer {
			t.Errorf("%s rows: %+v, want %d by the issuer", action, p.Entries, want)
		}
	}
}
